// claim, settle, published, stillHeld, notices, renotice: the scripts of push delivery
// (src/dispatch drives them).
import { type CodeName, codeName } from "../../codes";
import { asArray, defineScript, jsonText, record } from "../script";

/** Claimed jobs of one push topic, with the topic's config (its push settings). */
export type ClaimedTopic = { topic: string; config: string; records: string[] };

export const claim = defineScript<ClaimedTopic[]>({
  name: "claim",
  lua: `
--[[ claim: reserves push jobs due by a horizon, for delivery at their due times.
  ARGV[4] horizon, unix ms: jobs due by then are claimed (never delivered before they are due)
  ARGV[5] most jobs   ARGV[6] most topics   ARGV[7] receipt nonce, unique per call
  ARGV[8] a topic, or "": only that topic (a request that just wrote a job due soon), else the
          push topics whose claims entry is due by the horizon, earliest first.
  Each job is reserved with a lease from its due time (lib/transitions.ts: claim), so any number
  of ticks and requests may claim at once and a job is sent once per lease. Then the schedule's
  ~push sentinel is set from the claims index.
  Returns, per topic with jobs claimed: topic, its config JSON, the number of records, records.
  A paused topic is left out, and off the claims index until it resumes.
  Cost when nothing is near: ZRANGE (claims), ZRANGE (claims, for the sentinel), ZADD or ZREM.
  Per topic: ZSCORE (push?), MGET (the topic's keys: its config), lib claim's.
]]
local horizon, most, maxTopics, nonce, only = tonumber(ARGV[4]), tonumber(ARGV[5]),
  tonumber(ARGV[6]), ARGV[7], ARGV[8]
local topics = {only}
if only == "" then
  topics = rcall("ZRANGE", key.claims, "-inf", horizon, "BYSCORE", "LIMIT", 0, maxTopics)
end
local out, taken = {}, 0
for n, topic in ipairs(topics) do
  if taken >= most then break end
  if not isPush(topic) or config(topic).paused then
    -- Pulled again, or paused: nothing to claim. Resuming makes its jobs claimable anew
    -- (scripts/topics.ts: configure).
    rcall("ZREM", key.claims, topic)
  else
    local records = {}
    claim(topic, horizon, most - taken, nonce .. n, records)
    if #records > 0 then
      out[#out + 1] = topic
      out[#out + 1] = fields(topic).config or "{}"
      out[#out + 1] = #records
      for _, raw in ipairs(records) do out[#out + 1] = raw end
      taken = taken + #records
    end
  end
end
rearmClaims()
return out
`,
  parse(reply) {
    const flat = asArray(reply, "claim");
    const out: ClaimedTopic[] = [];
    for (let i = 0; i < flat.length; ) {
      const topic = String(flat[i]);
      const config = jsonText(flat[i + 1]);
      const count = Number(flat[i + 2]);
      const records = flat.slice(i + 3, i + 3 + count).map((raw) => record(raw, "claim"));
      out.push({ topic, config, records });
      i += 3 + count;
    }
    return out;
  },
});

/** How a delivery attempt ended, as the settle script takes it. */
export type SettleOutcome = "done" | "retry" | "bury" | "fail";

/** CODE.ok and the record after the change, or why the answer came too late (it is dropped). */
export type SettleReply = { code: CodeName; value: string };

export const settle = defineScript<SettleReply>({
  name: "settle",
  lua: `
--[[ settle: applies a push receiver's answer to the reservation it was delivered under.
  ARGV[4] id   ARGV[5] receipt of that reservation   ARGV[6] done | retry | bury | fail
  ARGV[7] wait before the next attempt, ms, or "" for the backoff step (retry, fail)
  ARGV[8] the HTTP status (0: no answer)   ARGV[9] the error, or ""
  done finishes the job; bury moves it to the dead letter; retry and fail give it back like a
  release (after the wait, or its backoff step; it dies when its attempts or its deadline run
  out). The attempt is recorded on the job (lastStatus, lastAt, lastError) and counted in the
  topic's stats (delivered for done, retry and bury; failed for fail). An answer for a
  reservation that has ended (a duplicate callback, a late answer after the lease ran out) is
  refused with the codes of lib/access.ts held, and changes nothing.
  Returns {CODE.ok, record} or {error code, current state}.
  Cost: GET, ZREM, SET, HINCRBY; retry/fail as release's (lib/transitions.ts retry).
]]
local id, receipt, outcome, wait = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
local meta, body, code = held(id, receipt, "")
if code ~= CODE.ok then return {code, meta and stateOf(meta) or ""} end
meta.lastStatus, meta.lastAt = tonumber(ARGV[8]), NOW
meta.lastError = nil
if ARGV[9] ~= "" then meta.lastError = ARGV[9] end
rcall("ZREM", key.reserved(meta.topic), id)
local counter = "delivered"
if outcome == "fail" then counter = "failed" end
rcall("HINCRBY", key.stats(meta.topic), counter, 1)
local raw
if outcome == "done" then
  meta.state, meta.endedAt, meta.leaseEnd, meta.messageId = "finished", NOW, nil, nil
  raw = save(id, meta, body)
elseif outcome == "bury" then
  raw = kill(id, meta, body, "buried")
else
  raw = retry(id, meta, body, wait)
end
return {CODE.ok, raw}
`,
  parse(reply) {
    const [code, value] = asArray(reply, "settle");
    return { code: codeName(code), value: String(value ?? "") };
  },
});

export const stillHeld = defineScript<boolean[]>({
  name: "stillHeld",
  lua: `
--[[ stillHeld: whether claimed jobs are still held under their claim's receipt, looked at just
  before a delivery that waited for its due time (a job deleted or settled meanwhile is not sent).
  ARGV[4..] pairs: id, receipt
  Returns 1 or 0 per pair. Changes nothing.
  Cost: per job GET.
]]
local out = {}
for i = 4, #ARGV, 2 do
  local meta = load(ARGV[i])
  if meta and meta.state == "reserved" and meta.receipt == ARGV[i + 1] then
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`,
  parse: (reply) => asArray(reply, "stillHeld").map((flag) => Number(flag) === 1),
});

export const published = defineScript<string[]>({
  name: "published",
  lua: `
--[[ published: records the QStash message each claimed job was published as, so that deleting
  the job cancels it.
  ARGV[4..] triples: id, receipt, message id
  A job no longer held under that receipt (deleted, or settled, meanwhile) is not changed, and
  its message id is returned: the caller cancels it.
  Returns the message ids to cancel.
  Cost: per job GET and SET.
]]
local cancel = {}
for i = 4, #ARGV, 3 do
  local id, receipt, messageId = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local meta, body = load(id)
  if meta and meta.state == "reserved" and meta.receipt == receipt then
    meta.messageId = messageId
    save(id, meta, body)
  else
    cancel[#cancel + 1] = messageId
  end
end
return cancel
`,
  parse: (reply) => asArray(reply, "published").map(String),
});

/** A dead push job whose topic's failureUrl is to be told. */
/**
 * A failure notice to send: the job's record ("" when it is gone) and its topic's config, and
 * when its sending first failed (undefined for a new one). `expired`: it failed for
 * NOTICE_RETRY_MS and was dropped; it is not to be sent.
 */
export type Notice = {
  id: string;
  record: string;
  config: string;
  firstFailedAt?: number;
  expired?: boolean;
};

/** How long a failure notice that cannot be sent is tried again (each minute): 3 days, as Stripe. */
export const NOTICE_RETRY_MS = 3 * 24 * 3600 * 1000;

export const notices = defineScript<Notice[]>({
  name: "notices",
  lua: `
--[[ notices: takes failure notices to send to their topics' failureUrl. A fifth of the room (at
  least one) goes to notices whose sending failed before and whose minute has passed, the rest to
  new ones (dead push jobs, in the order they died), any left over to more due retries: one
  receiver that keeps failing neither holds back the others' notices nor is starved by them.
  ARGV[4] most to take   ARGV[5] how long a failing notice is retried, ms (NOTICE_RETRY_MS)
  Retries are "<ms when due>|<ms of the first failure>|<id>", due in the order they were put back.
  Returns four values per notice: id, record (or "" when it is gone), its topic's config JSON,
  and when its sending first failed ("" for a new one, "x" when that was ARGV[5] ago or more:
  it is dropped, not to be sent). A notice that cannot be sent goes back on the retry list
  (scripts/push.ts: renotice), so it is sent at least once unless the sender dies with it.
  The schedule's ~notices entry is dropped once both lists are empty, and moved to the first
  retry's time when only retries wait.
  Cost: LPOP, LRANGE (+ LTRIM) once or twice, LLEN, ZADD or ZREM (+ LINDEX), per notice GET
  and MGET (its topic's keys: the config).
]]
local most, keep = tonumber(ARGV[4]), tonumber(ARGV[5])
local out = {}
local function add(id, firstFailed)
  local raw = rcall("GET", key.job(id)) or ""
  local cfg = "{}"
  if raw ~= "" and firstFailed ~= "x" then cfg = fields(decode(raw).topic).config or "{}" end
  out[#out + 1] = id
  out[#out + 1] = raw
  out[#out + 1] = cfg
  out[#out + 1] = firstFailed
end
local function parts(entry)
  local a = string.find(entry, "|", 1, true)
  local b = string.find(entry, "|", a + 1, true)
  return tonumber(string.sub(entry, 1, a - 1)), tonumber(string.sub(entry, a + 1, b - 1)),
    string.sub(entry, b + 1)
end
-- Up to n retries whose time has come, off the head of the list.
local function dueRetries(n)
  if n <= 0 then return 0 end
  local head = rcall("LRANGE", key.noticeRetries, 0, n - 1)
  local taken = 0
  for _, entry in ipairs(head) do
    local due, first, id = parts(entry)
    if due > NOW then break end
    taken = taken + 1
    if NOW - first >= keep then add(id, "x") else add(id, tostring(first)) end
  end
  if taken > 0 then rcall("LTRIM", key.noticeRetries, taken, -1) end
  return taken
end
local retried = dueRetries(math.max(1, math.floor(most / 5)))
local fresh = rcall("LPOP", key.notices, most - retried) or {}
for _, id in ipairs(fresh) do add(id, "") end
dueRetries(most - retried - #fresh)
if rcall("LLEN", key.notices) == 0 then
  local first = rcall("LINDEX", key.noticeRetries, 0)
  if first then
    local due = parts(first)
    rcall("ZADD", key.schedule, due, "~notices")
  else
    rcall("ZREM", key.schedule, "~notices")
  end
end
return out
`,
  parse(reply) {
    const flat = asArray(reply, "notices");
    const out: Notice[] = [];
    for (let i = 0; i < flat.length; i += 4) {
      const failed = String(flat[i + 3] ?? "");
      const notice: Notice = {
        id: String(flat[i]),
        record: String(flat[i + 1] ?? ""),
        config: jsonText(flat[i + 2]),
      };
      if (failed === "x") notice.expired = true;
      else if (failed !== "") notice.firstFailedAt = Number(failed);
      out.push(notice);
    }
    return out;
  },
});

export const renotice = defineScript<void>({
  name: "renotice",
  lua: `
--[[ renotice: puts notices that could not be sent back on the retry list, due a minute later.
  ARGV[4..] "<ms of the notice's first failure>|<id>".   Cost: RPUSH, ZADD LT.
]]
if #ARGV >= 4 then
  local due = NOW + 60000
  local entries = {}
  for i = 4, #ARGV do entries[#entries + 1] = due .. "|" .. ARGV[i] end
  rcall("RPUSH", key.noticeRetries, unpack(entries))
  rcall("ZADD", key.schedule, "LT", due, "~notices")
end
return 1
`,
  parse: () => undefined,
});
