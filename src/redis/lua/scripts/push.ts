// claim, settle, published, stillHeld, notices, renotice: the scripts of push delivery
// (src/dispatch drives them).
import {
  FLOW_AHEAD_MS,
  FLOW_RETRY_MS,
  FLOW_SPACING_MS,
  SETTLE_OUTCOMES,
  type SettleOutcome,
} from "../../../domain/push";
import { type CodeName, codeName } from "../../codes";
import { SCHEDULE_MARKERS } from "../../keys";
import { asArray, byName, defineScript, jsonText, record } from "../script";

/**
 * Claimed jobs of one push topic, with the topic's config (its push settings). `sendAt`: a topic
 * with `rate` has each job sent at its own time (the record's order), else undefined (each at its
 * due time).
 */
export type ClaimedTopic = { topic: string; config: string; records: string[]; sendAt?: number[] };

/**
 * What a claim took, per topic; and `held`: the topics with flow control whose jobs it held back
 * (or that have jobs due later within the horizon), and when a claim may take more of each.
 */
export type ClaimReply = ClaimedTopic[] & { held: { topic: string; at: number }[] };

export const claim = defineScript<ClaimReply>({
  name: "claim",
  lua: `
--[[ claim: reserves push jobs due by a horizon, for delivery at their due times.
  ARGV[4] horizon, unix ms: jobs due by then are claimed (never delivered before they are due)
  ARGV[5] most jobs   ARGV[6] most topics   ARGV[7] receipt nonce, unique per call
  ARGV[8] a topic, or "": only that topic (a request that just wrote a job due soon), else the
          push topics whose claims entry is due by the horizon, earliest first.
  ARGV[9] jobs to take off the hand-offs' promise (a run a hand-off asked for, its first
          claim), or 0   ARGV[10] that run's wave (a field of key.handOffWaves), or "" (a run
          asked for before waves: key.handOffs).
  Each job is reserved with a lease from its due time (lib/transitions.ts: claim), so any number
  of ticks and requests may claim at once and a job is sent once per lease. Then the schedule's
  ~push sentinel is set from the claims index.
  Flow control (a push config with parallelism or rate): such a topic's jobs are claimed only
  FLOW_AHEAD before they are sent; at most parallelism minus its unanswered deliveries (leases
  not yet ended), and with rate only those whose send time (the later of their due time and the
  topic's next slot, key.flowSlot; slots FLOW_SPACING / rate apart) falls within FLOW_AHEAD.
  The others stay waiting in their place (due order kept).
  Returns: the number of held entries, then per such topic its name and when a claim may take
  more of it (the next slot, FLOW_RETRY from now while the parallelism is full, or its next due
  time, each less FLOW_AHEAD; only when by the horizon); then per topic with jobs claimed: topic,
  its config JSON, the number of records, their send times ("" unless rate: comma-separated ms),
  the records. A paused topic is left out, and off the claims index until it resumes.
  Cost when nothing is near: ZRANGE (claims), ZRANGE (claims, for the sentinel), ZADD or ZREM.
  Per topic: ZSCORE (push?), MGET (the topic's keys: its config), lib claim's. A hand-off's run:
  HEXISTS, HINCRBY (or HDEL). Flow control: ZCOUNT (parallelism), GET (rate) and SET when it claimed.
]]
local horizon, most, maxTopics, nonce, only = tonumber(ARGV[4]), tonumber(ARGV[5]),
  tonumber(ARGV[6]), ARGV[7], ARGV[8]
local consume, wave = tonumber(ARGV[9]) or 0, ARGV[10] or ""
local FLOW_AHEAD, FLOW_SPACING, FLOW_RETRY = ${FLOW_AHEAD_MS}, ${FLOW_SPACING_MS}, ${FLOW_RETRY_MS}
if consume > 0 and wave ~= "" then
  if rcall("HEXISTS", key.handOffWaves, wave) == 1
    and rcall("HINCRBY", key.handOffWaves, wave, -consume) <= 0 then
    rcall("HDEL", key.handOffWaves, wave)
  end
elseif consume > 0 and rcall("GET", key.handOffs) then
  if rcall("DECRBY", key.handOffs, consume) <= 0 then rcall("DEL", key.handOffs) end
end
local topics = {only}
if only == "" then
  topics = rcall("ZRANGE", key.claims, "-inf", horizon, "BYSCORE", "LIMIT", 0, maxTopics)
end
local out, held, taken = {}, {}, 0
-- A topic with flow control: claims what its limits leave room for, sent FLOW_AHEAD ahead at
-- most; notes when to come back for the rest. Returns the records' send times ("" without rate).
local function claimFlow(topic, push, n, records)
  local limit, upTo = most - taken, math.min(horizon, NOW + FLOW_AHEAD)
  local room, flow = nil, nil
  if push.parallelism then
    room = push.parallelism - rcall("ZCOUNT", key.reserved(topic), "(" .. NOW, "+inf")
    limit = math.min(limit, room)
  end
  if push.rate then
    flow = {slot = math.max(tonumber(rcall("GET", key.flowSlot(topic)) or "0"), NOW),
      spacing = FLOW_SPACING / push.rate, at = {}}
    if flow.slot > upTo then
      limit = 0
    else
      limit = math.min(limit, math.floor((upTo - flow.slot) / flow.spacing) + 1)
    end
  end
  local nextAt = nil
  if limit > 0 then
    nextAt = claim(topic, upTo, limit, nonce .. n, records, flow)
  else
    nextAt = tonumber(rcall("ZSCORE", key.claims, topic))
  end
  if flow and #flow.at > 0 then
    rcall("SET", key.flowSlot(topic), flow.slot, "PX", math.ceil(flow.slot - NOW) + 1)
  end
  if nextAt then
    local again = nextAt - FLOW_AHEAD
    if flow and flow.slot - FLOW_AHEAD > again then again = flow.slot - FLOW_AHEAD end
    if room and room - #records <= 0 and again < NOW + FLOW_RETRY then again = NOW + FLOW_RETRY end
    if again <= horizon then
      held[#held + 1] = topic
      held[#held + 1] = math.max(again, NOW + 1)
    end
  end
  if flow then return table.concat(flow.at, ",") end
  return ""
end
for n, topic in ipairs(topics) do
  if taken >= most then break end
  local cfg = isPush(topic) and config(topic)
  if not cfg or cfg.paused then
    -- Pulled again, or paused: nothing to claim. Resuming makes its jobs claimable anew
    -- (scripts/topics.ts: configure).
    rcall("ZREM", key.claims, topic)
  else
    local records, at = {}, ""
    local push = cfg.push
    if type(push) == "table" and (push.rate or push.parallelism) then
      at = claimFlow(topic, push, n, records)
    else
      claim(topic, horizon, most - taken, nonce .. n, records)
    end
    if #records > 0 then
      out[#out + 1] = topic
      out[#out + 1] = fields(topic).config or "{}"
      out[#out + 1] = #records
      out[#out + 1] = at
      for _, raw in ipairs(records) do out[#out + 1] = raw end
      taken = taken + #records
    end
  end
end
rearmClaims()
local reply = {#held / 2}
for _, value in ipairs(held) do reply[#reply + 1] = value end
for _, value in ipairs(out) do reply[#reply + 1] = value end
return reply
`,
  parse(reply) {
    const flat = asArray(reply, "claim");
    const heldCount = Number(flat[0] ?? 0);
    const held: ClaimReply["held"] = [];
    for (let k = 0; k < heldCount; k++) {
      held.push({ topic: String(flat[1 + 2 * k]), at: Number(flat[2 + 2 * k]) });
    }
    const groups: ClaimedTopic[] = [];
    for (let i = 1 + 2 * heldCount; i < flat.length; ) {
      const topic = String(flat[i]);
      const config = jsonText(flat[i + 1]);
      const count = Number(flat[i + 2]);
      const at = String(flat[i + 3] ?? "");
      const records = flat.slice(i + 4, i + 4 + count).map((raw) => record(raw, "claim"));
      const group: ClaimedTopic = { topic, config, records };
      if (at !== "") group.sendAt = at.split(",").map(Number);
      groups.push(group);
      i += 4 + count;
    }
    return Object.assign(groups, { held });
  },
});

/** A wave of fresh runs a hand-off asks for: the wave's number (its start / the wave's length) and its runs. */
export type HandOffWave = { wave: number; runs: number };

export const handOff = defineScript<HandOffWave[]>({
  name: "handOff",
  lua: `
--[[ handOff: the fresh runs to ask for, wave by wave, for the push jobs a run's budget could not
  take, up to the horizon of the claim it stopped.
  ARGV[4] horizon, unix ms: waiting jobs due by then count
  ARGV[5] jobs one fresh run takes   ARGV[6] most runs to ask for at once
  ARGV[7] a topic, or "": only that topic, else the push topics whose claims entry is due by the
          horizon (at most 100, earliest first)
  ARGV[8] how long an ask is remembered after the last wave it asked for begins, ms
  ARGV[9] a wave's length, ms: wave w holds the jobs due in [w, w + 1) times it (the first wave,
          now's, also those ready or due before); a run asked for wave w comes a little before
          it begins and claims what falls due until it ends.
  Per wave from now's to the horizon's, the jobs left (ready, or delayed and due in the wave) are
  counted, less those that runs asked for that wave already are still to take (a field of
  key.handOffWaves); runs for the rest are asked for (up to ARGV[6] in all, earliest waves first)
  and added to the wave's field. Fields of waves begun before now's are dropped.
  Returns: per wave with runs to ask for, its number and the runs.
  Cost: ZRANGE (claims) or ZSCORE; per topic one ZCOUNT a wave and one for the ready jobs;
  HGETALL; HDEL, HINCRBY a wave and PEXPIRE when asking (a tick's horizon spans 4 or 5 waves).
]]
local horizon, perRun, maxRuns, only, ttl, span = tonumber(ARGV[4]), tonumber(ARGV[5]),
  tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])
local topics = {}
if only == "" then
  topics = rcall("ZRANGE", key.claims, "-inf", horizon, "BYSCORE", "LIMIT", 0, 100)
elseif rcall("ZSCORE", key.claims, only) then
  topics = {only}
end
if #topics == 0 then return {} end
local first, last = math.floor(NOW / span), math.floor(horizon / span)
local left = {}
for w = first, last do left[w] = 0 end
for _, topic in ipairs(topics) do
  left[first] = left[first] + rcall("ZCOUNT", key.ready(topic), "-inf", "+inf")
  for w = first, last do
    local from = "(" .. (w * span)
    if w == first then from = "-inf" end
    local to = "(" .. ((w + 1) * span)
    if w == last then to = horizon end
    left[w] = left[w] + rcall("ZCOUNT", key.delayed(topic), from, to)
  end
end
local promised = {}
local stored = rcall("HGETALL", key.handOffWaves)
for i = 1, #stored, 2 do
  local w = tonumber(stored[i])
  if w and w >= first then
    promised[w] = tonumber(stored[i + 1]) or 0
  else
    rcall("HDEL", key.handOffWaves, stored[i])
  end
end
local out, asked = {}, 0
for w = first, last do
  local runs = math.ceil((left[w] - (promised[w] or 0)) / perRun)
  if runs > maxRuns - asked then runs = maxRuns - asked end
  if runs > 0 then
    rcall("HINCRBY", key.handOffWaves, w, runs * perRun)
    out[#out + 1] = w
    out[#out + 1] = runs
    asked = asked + runs
  end
end
if asked > 0 then rcall("PEXPIRE", key.handOffWaves, math.max(0, last * span - NOW) + ttl) end
return out
`,
  parse(reply) {
    const flat = asArray(reply, "handOff").map(Number);
    const waves: HandOffWave[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      waves.push({ wave: flat[i] as number, runs: flat[i + 1] as number });
    }
    return waves;
  },
});

export type { SettleOutcome };

/** Each outcome by its name, for the settle script's Lua: checked against the list when compiled. */
const OUTCOME = byName(SETTLE_OUTCOMES);

/** CODE.ok and the record after the change, or why the answer came too late (it is dropped). */
export type SettleReply = { code: CodeName; value: string };

export const settle = defineScript<SettleReply[]>({
  name: "settle",
  lua: `
--[[ settle: applies push receivers' answers to the reservations they were delivered under, one
  or many in one call (the deliveries a run finished within a few milliseconds).
  ARGV[4..] groups of six:
    id   receipt of that reservation   ${SETTLE_OUTCOMES.join(" | ")}
    wait before the next attempt, ms, or "" for the backoff step (retry, fail)
    the HTTP status (0: no answer)   the error, or ""
  Each answer is applied on its own: done finishes the job; bury moves it to the dead letter; retry and fail give it back like a
  release (after the wait, or its backoff step; it dies when its attempts or its deadline run
  out). The attempt is recorded on the job (lastStatus, lastAt; a failed one's error, escaped by
  the caller, as its lastError: lib/transitions.ts failed) and counted in the
  topic's stats (delivered for done, retry and bury; failed for fail). An answer for a
  reservation that has ended (a duplicate callback, a late answer after the lease ran out) is
  refused with the codes of lib/access.ts held, and changes nothing.
  Returns, per group: CODE.ok and the record, or an error code and the current state.
  Cost: per group GET, ZREM, SET, HINCRBY; retry/fail as release's (lib/transitions.ts retry).
]]
local function settleOne(id, receipt, outcome, wait, status, err)
  local meta, body, code = held(id, receipt, "")
  if code ~= CODE.ok then return code, meta and stateOf(meta) or "" end
  meta.lastStatus, meta.lastAt = tonumber(status), NOW
  failed(meta, err)
  rcall("ZREM", key.reserved(meta.topic), id)
  local counter = "delivered"
  if outcome == "${OUTCOME.fail}" then counter = "failed" end
  rcall("HINCRBY", key.stats(meta.topic), counter, 1)
  if outcome == "${OUTCOME.done}" then
    meta.state, meta.endedAt, meta.leaseEnd, meta.messageId = "finished", NOW, nil, nil
    return CODE.ok, save(id, meta, body)
  elseif outcome == "${OUTCOME.bury}" then
    return CODE.ok, kill(id, meta, body, "buried")
  end
  return CODE.ok, retry(id, meta, body, wait)
end
local out = {}
for i = 4, #ARGV, 6 do
  local code, value = settleOne(ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]),
    ARGV[i + 4], ARGV[i + 5])
  out[#out + 1] = code
  out[#out + 1] = value
end
return out
`,
  parse(reply) {
    const flat = asArray(reply, "settle");
    const out: SettleReply[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      out.push({ code: codeName(flat[i]), value: String(flat[i + 1] ?? "") });
    }
    return out;
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

/**
 * A failure notice to send: the dead job's id and topic, its record ("" when it is gone), its
 * topic's config, and when its sending first failed (undefined for a new one). `expired`: it
 * failed for NOTICE_RETRY_MS and was dropped; it is not to be sent.
 */
export type Notice = {
  id: string;
  topic: string;
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
--[[ notices: takes failure notices to send to their topics' failureUrl, fairly between topics.
  Each topic keeps its own new notices (its dead push jobs, in the order they died) and retries
  (notices whose sending failed, each due a minute after its last try). A round takes the topics
  whose turn has come (key.noticing), the longest waiting first, and shares its room among them,
  each an even part of what is left (what one leaves goes round again to the others). Within a
  topic, its part goes to new notices and due retries in the order they could first be sent
  (queued; due). A topic with new notices left has its next turn now, behind those still
  waiting; one with only retries, at the first one's time; one with none leaves, as does one
  whose config has no failureUrl, its notices dropped without taking room. So a tenant
  whose jobs die by the thousand, or whose receiver keeps failing, takes its part of each round
  and no more.
  ARGV[4] most to take   ARGV[5] how long a failing notice is retried, ms (NOTICE_RETRY_MS)
  Returns five values per notice: id, topic, record (or "" when it is gone), its topic's config
  JSON, and when its sending first failed ("" for a new one, "x" when that was ARGV[5] ago or
  more: it is dropped, not to be sent). A notice that cannot be sent goes back on its topic's
  retry list (renotice), so it is sent at least once unless the sender dies with it.
  The schedule's ${SCHEDULE_MARKERS.notices} entry follows the first turn in key.noticing, and goes when none waits.
  Cost: EXISTS, ZRANGE twice, ZADD or ZREM; per topic served (again only when it used all of its
  part) MGET (its config), LRANGE twice (+ LTRIM once or twice; EXISTS, LINDEX when a list gave
  a whole part), ZADD or ZREM, or for a topic without failureUrl DEL and ZREM; per notice GET.
  At most ARGV[4] topics, and notices.
]]
local most, keep = tonumber(ARGV[4]), tonumber(ARGV[5])
local out = {}
-- A new notice is "<ms when queued>|<id>", a retry "<ms when due>|<ms of the first failure>|<id>"
-- (ids hold no "|"). Entries of earlier formats are read too, their missing times as now: a bare
-- id, or a retry's "<ms of the first failure>|<id>" (due then). No entry can fail the script.
local function split(entry)
  local a = string.find(entry, "|", 1, true)
  if not a then return NOW, entry end
  return tonumber(string.sub(entry, 1, a - 1)) or NOW, string.sub(entry, a + 1)
end
local function parts(entry)
  local a = string.find(entry, "|", 1, true)
  if not a then return NOW, NOW, entry end
  local b = string.find(entry, "|", a + 1, true)
  if not b then
    local first = tonumber(string.sub(entry, 1, a - 1)) or NOW
    return first, first, string.sub(entry, a + 1)
  end
  return tonumber(string.sub(entry, 1, a - 1)) or NOW,
    tonumber(string.sub(entry, a + 1, b - 1)) or NOW, string.sub(entry, b + 1)
end
-- Earlier versions queued every topic's notices in one list, and their retries in another: what
-- is there moves to the topics' own lists, a round's room at a time. A notice whose job record is
-- gone could not be sent; it is dropped.
local legacy = rcall("EXISTS", key.legacyNotices, key.legacyNoticeRetries) > 0
if legacy then
  for _, entry in ipairs(rcall("LPOP", key.legacyNotices, most) or {}) do
    local _, id = split(entry)
    local raw = rcall("GET", key.job(id))
    if raw then
      local topic = decode(raw).topic
      rcall("RPUSH", key.topicNotices(topic), NOW .. "|" .. id)
      rcall("ZADD", key.noticing, "LT", NOW, topic)
    end
  end
  for _, entry in ipairs(rcall("LPOP", key.legacyNoticeRetries, most) or {}) do
    local due, first, id = parts(entry)
    local raw = rcall("GET", key.job(id))
    if raw then
      local topic = decode(raw).topic
      rcall("RPUSH", key.topicNoticeRetries(topic), due .. "|" .. first .. "|" .. id)
      rcall("ZADD", key.noticing, "LT", due, topic)
    end
  end
  legacy = rcall("EXISTS", key.legacyNotices, key.legacyNoticeRetries) > 0
end
-- Up to part notices of one topic; answers how many.
local served = 0
local function serve(topic, part)
  local fresh, retries = key.topicNotices(topic), key.topicNoticeRetries(topic)
  local text = fields(topic).config or "{}"
  local push = cjson.decode(text).push
  -- No failureUrl (any more): its notices cannot be sent; they go, taking no room.
  if type(push) ~= "table" or type(push.failureUrl) ~= "string" then
    rcall("DEL", fresh, retries)
    rcall("ZREM", key.noticing, topic)
    return 0
  end
  local taken = 0
  local function put(id, firstFailed)
    local raw = rcall("GET", key.job(id)) or ""
    local cfg = "{}"
    if raw ~= "" and firstFailed ~= "x" then cfg = text end
    out[#out + 1] = id
    out[#out + 1] = topic
    out[#out + 1] = raw
    out[#out + 1] = cfg
    out[#out + 1] = firstFailed
    taken = taken + 1
  end
  -- The two lists merged by when each notice could first be sent: a new one when it was queued, a
  -- retry when its minute is up. Neither kind waits behind the other's later ones.
  local new = rcall("LRANGE", fresh, 0, part - 1)
  local old = rcall("LRANGE", retries, 0, part - 1)
  local f, r = 1, 1
  while taken < part do
    local queued, id = nil, nil
    if new[f] then queued, id = split(new[f]) end
    local due, first, retried = nil, nil, nil
    if old[r] then due, first, retried = parts(old[r]) end
    if due and due <= NOW and (queued == nil or due < queued) then
      r = r + 1
      if NOW - first >= keep then put(retried, "x") else put(retried, tostring(first)) end
    elseif queued then
      f = f + 1
      put(id, "")
    else
      break
    end
  end
  if f > 1 then rcall("LTRIM", fresh, f - 1, -1) end
  if r > 1 then rcall("LTRIM", retries, r - 1, -1) end
  -- Topics served now and left with new notices come round again in the order served, after
  -- those still waiting: a thousandth of a ms apart, not tied (ties go by name, the early names
  -- first every round).
  -- What is left of each list shows in what was read, unless a whole part was read.
  served = served + 1
  local turn = nil
  if new[f] or (#new == part and rcall("EXISTS", fresh) == 1) then turn = NOW + served / 1000 end
  local first = old[r] or (#old == part and rcall("LINDEX", retries, 0)) or nil
  if first then
    local due = parts(first)
    if turn == nil or due < turn then turn = due end
  end
  if turn then rcall("ZADD", key.noticing, turn, topic) else rcall("ZREM", key.noticing, topic) end
  return taken
end
-- Passes over the topics whose turn has come, each an even part of the room left; what a topic
-- leaves of its part goes round again to those that used all of theirs.
local open = rcall("ZRANGE", key.noticing, "-inf", NOW, "BYSCORE", "LIMIT", 0, most)
local room = most
while room > 0 and #open > 0 do
  local again = {}
  for i, topic in ipairs(open) do
    if room <= 0 then break end
    local part = math.ceil(room / (#open - i + 1))
    local took = serve(topic, part)
    room = room - took
    if took == part then again[#again + 1] = topic end
  end
  open = again
end
local first = rcall("ZRANGE", key.noticing, 0, 0, "WITHSCORES")
if legacy then
  rcall("ZADD", key.schedule, NOW, "${SCHEDULE_MARKERS.notices}")
elseif first[1] then
  rcall("ZADD", key.schedule, first[2], "${SCHEDULE_MARKERS.notices}")
else
  rcall("ZREM", key.schedule, "${SCHEDULE_MARKERS.notices}")
end
return out
`,
  parse(reply) {
    const flat = asArray(reply, "notices");
    const out: Notice[] = [];
    for (let i = 0; i < flat.length; i += 5) {
      const failed = String(flat[i + 4] ?? "");
      const notice: Notice = {
        id: String(flat[i]),
        topic: String(flat[i + 1]),
        record: String(flat[i + 2] ?? ""),
        config: jsonText(flat[i + 3]),
      };
      if (failed === "x") notice.expired = true;
      else if (failed !== "") notice.firstFailedAt = Number(failed);
      out.push(notice);
    }
    return out;
  },
});

/** Notices that could not be sent, by topic: `<ms of the first failure>|<id>` each. */
export type Unsent = Map<string, string[]>;

export const renotice = defineScript<void>({
  name: "renotice",
  lua: `
--[[ renotice: puts notices that could not be sent back on their topics' retry lists, due a
  minute later; a topic's next turn comes then at the latest.
  ARGV[4..] per topic: the topic, how many entries, then each "<ms of its first failure>|<id>".
  Cost per topic: RPUSH, ZADD LT; then ZADD LT.
]]
local due, i = NOW + 60000, 4
while i <= #ARGV do
  local topic, n = ARGV[i], tonumber(ARGV[i + 1])
  local entries = {}
  for j = 1, n do entries[j] = due .. "|" .. ARGV[i + 1 + j] end
  rcall("RPUSH", key.topicNoticeRetries(topic), unpack(entries))
  rcall("ZADD", key.noticing, "LT", due, topic)
  i = i + 2 + n
end
if #ARGV >= 4 then rcall("ZADD", key.schedule, "LT", due, "${SCHEDULE_MARKERS.notices}") end
return 1
`,
  parse: () => undefined,
});

/** renotice's arguments for the notices not sent. */
export function renoticeArgs(unsent: Unsent): string[] {
  const args: string[] = [];
  for (const [topic, entries] of unsent) args.push(topic, String(entries.length), ...entries);
  return args;
}
