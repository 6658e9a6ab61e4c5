// watchStart, watchRead, watchPolled, watchStop: the transitions of a watch, a payment's or a
// refund's. A watch is a hash (keys.ts: watch); its polls are a job of an internal push topic
// (__payments, __refunds), claimed and delivered to its poller like a push job; its outcome is a
// job added to each notify topic. Both kinds share the hash, the scripts and the one transition.
import { ENDED_WATCH_KEEP_MS, LATE_PAYMENT_AFTER } from "../../../domain/payments";
import { LATE_REFUND_AFTER } from "../../../domain/refunds";
import { WATCH_JOB_PREFIX } from "../../keys";
import { asArray, byName, defineScript, jsonText } from "../script";

/** The internal topic whose jobs are payment polls. */
export const PAYMENTS_TOPIC = "__payments";

/** The config of the internal topic: pushed, to delayq's own poller. */
export const PAYMENTS_TOPIC_CONFIG = JSON.stringify({
  push: { url: "internal:payments", via: "internal", timeout: 60 },
});

/** The internal topic whose jobs are refund polls. */
export const REFUNDS_TOPIC = "__refunds";

/** Its config: pushed, to delayq's refund poller. */
export const REFUNDS_TOPIC_CONFIG = JSON.stringify({
  push: { url: "internal:refunds", via: "internal", timeout: 60 },
});

/** The listing index a watch is kept in (keys.ts: watches, refunds), by its kind. */
export type WatchIndex = "watches" | "refunds";

/**
 * Lua: makes sure a watch kind's internal topic (ARGV[12], its config ARGV[11]) is a push topic:
 * its polls are claimed like push jobs.
 */
const ENSURE_TOPIC = `
local function ensureInternalTopic(topic, config)
  local t = fields(topic)
  if not t.config then
    t.config = config
    rcall("SET", key.config(topic), t.config)
    rcall("ZADD", key.pushTopics, 0, topic)
    pushed[topic] = true
  end
end
`;

/**
 * The fields of a watch's hash (keys.ts: watch), named once: the scripts below write them (by
 * interpolation) and TypeScript reads them by these names (WatchRecord; payments/watch-records.ts).
 */
export const WATCH_FIELDS = [
  /**
   * The watch's spec, JSON (provider, account, outTradeNo, schedule, deadline, closeOnDeadline,
   * notify, createdAt, amount?; a refund's: kind "refund", provider, account, outRefundNo,
   * outTradeNo?, schedule, deadline, notify, createdAt); its poll job's body too.
   */
  "spec",
  /** The notify topics, a JSON array. */
  "notify",
  /** The caller's metadata, JSON text kept byte for byte. */
  "metadata",
  /**
   * polling, then stopped or the outcome's state (a payment's paid, closed, failed, expired,
   * mismatch; a refund's succeeded, closed, abnormal, expired).
   */
  "state",
  /** Polls answered so far. */
  "polls",
  /** When the watch started, ms. */
  "createdAt",
  /** When polling ends, ms. */
  "deadline",
  /** The last answer, JSON: {tradeState, at}. */
  "lastAnswer",
  /** Transient answers in a row (their retries double); none after a pending one. */
  "streak",
  /** The outcome job's body, once there is one (after a late payment: the late one). */
  "outcome",
  /** When the watch reached its outcome or was stopped, ms. */
  "endedAt",
  /** After a late payment: the outcome the watch had ended with before it, if any. */
  "firstOutcome",
  /** The ids of the notifications taken for this watch, newest first, space-separated (≤ 16). */
  "notified",
  /**
   * The id of the token whose request started the watch (http/auth.ts: TokenSet; never the
   * token), while the watch counts in that token's `tokenWatches` (keys.ts); removed when the
   * watch ends. Absent for a watch started without one (or before tokens were counted).
   */
  "owner",
] as const;

export type WatchField = (typeof WATCH_FIELDS)[number];

/** The fields by name, for the Lua below. */
const FIELD = byName(WATCH_FIELDS);

/** How many notification ids a watch remembers (a payment's notifications and their resends). */
export const NOTIFY_IDS_KEPT = 16;

/** Lua: how long an ended watch is kept, ms: the retention window, and at least 25 hours. */
const KEEP = `math.max(RETENTION, ${ENDED_WATCH_KEEP_MS})`;

/**
 * Lua: a watch leaving polling (an outcome, a stop) no longer counts against the token that
 * started it: its owner's count goes down by one, and the owner field goes, so that it never
 * counts down twice.
 */
const RELEASE_OWNER = `
local function releaseOwner(wkey)
  local owner = rcall("HGET", wkey, "${FIELD.owner}")
  if not owner then return end
  rcall("HDEL", wkey, "${FIELD.owner}")
  if rcall("DECR", key.tokenWatches(owner)) <= 0 then rcall("DEL", key.tokenWatches(owner)) end
end
`;

/** What watchStart answers when the token has as many polling watches as it may. */
export type TooManyWatches = { tooMany: number };

/** A watch as stored: its hash's fields, and when its next poll is due. */
export type WatchRecord = {
  fields: Partial<Record<WatchField, string>>;
  nextPollAt?: number;
};

function readWatch(flat: readonly unknown[]): WatchRecord {
  const [nextPollAt, ...pairs] = flat;
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < pairs.length; i += 2) fields[String(pairs[i])] = jsonText(pairs[i + 1]);
  const next = Number(nextPollAt);
  return next >= 0 ? { fields, nextPollAt: next } : { fields };
}

/** Lua: the watch's fields and its poll's due time (-1 when none waits). */
const READ = `
local function readWatch(watchId)
  local stored = rcall("HGETALL", key.watch(watchId))
  local nextAt = -1
  local meta = load("${WATCH_JOB_PREFIX}" .. watchId)
  -- A poll claimed ahead of its due time (the dispatcher's lookahead) is still the next one.
  if meta and (meta.state == "waiting" or (meta.state == "reserved" and meta.due > NOW)) then
    nextAt = meta.due
  end
  local out = {nextAt}
  for _, value in ipairs(stored) do out[#out + 1] = value end
  return out
end
`;

export const watchStart = defineScript<{ created: boolean; watch: WatchRecord } | TooManyWatches>({
  name: "watchStart",
  lua: `
--[[ watchStart: starts watching an order (or a refund), idempotently by watch id.
  ARGV[4] watch id   ARGV[5] spec JSON (a payment's: provider, account, outTradeNo, schedule,
  deadline, closeOnDeadline, notify, createdAt, amount?; a refund's: kind, provider, account,
  outRefundNo, outTradeNo?, schedule, deadline, notify, createdAt; it is the poll job's body)
  ARGV[6] deadline (ms)   ARGV[7] first poll due (ms)   ARGV[8] the schedule as backoff JSON
  ARGV[9] the notify topics, a JSON array   ARGV[10] metadata, JSON text kept byte for byte (Lua
  never parses it)   ARGV[11] the internal topic's config JSON (set once)
  ARGV[12] the internal topic of the watch's polls (${PAYMENTS_TOPIC}, ${REFUNDS_TOPIC})
  ARGV[13] the listing index it joins: "watches" (payments) or "refunds"
  ARGV[14] the id of the token starting it, or "" for none   ARGV[15] the most watches polling
  that token's requests started (payments and refunds together)
  A watch that exists is answered as it is. A new one is the hash (state polling, polls 0)
  and its poll job ${WATCH_JOB_PREFIX}<id> in the internal topic, due at the first poll; it
  counts in the token's tokenWatches until it ends (watchPolled, watchStop), unless the token
  has ARGV[15] polling already: then nothing is written.
  Returns {1 if created else 0, then what watchRead returns}, or {-1, the count} when the token
  has too many.
  Cost: EXISTS; with a token GET (its count); when new HSET, ZADD (the listing's index), GET, ZRANGE, EXISTS x2, SET (its
  sweep; ZREM for a gone watch), and the poll job's add (SET NX, GET, ZADD, ZADD LT x2, ZADD NX,
  INCR), plus MGET of the internal topic's keys (and SET of its config the first time), INCR
  (the token's count); then HGETALL, GET.
]]
${ENSURE_TOPIC}
${READ}
-- Keeps the listing's index bounded without a listing: each start looks at the next two
-- entries in start order (from where the last start left off, round and round) and drops those
-- whose watch is gone (outlived its retention). Entries go stale no faster than starts add
-- them, so the sweep passes each stale one within about half as many starts as there are
-- entries: the index holds about twice the watches kept, at most.
local function sweepWatches(index, sweep)
  local from = rcall("GET", sweep)
  local next = {}
  if from then
    next = rcall("ZRANGE", index, "(" .. from, "+inf", "BYSCORE", "LIMIT", 0, 2, "WITHSCORES")
  end
  -- Fewer than two left before the end (or never begun): go on from the first.
  if #next < 4 then
    local first = rcall("ZRANGE", index, 0, (4 - #next) / 2 - 1, "WITHSCORES")
    for _, value in ipairs(first) do next[#next + 1] = value end
  end
  if #next == 0 then return end
  for i = 1, #next, 2 do
    if rcall("EXISTS", key.watch(next[i])) == 0 then rcall("ZREM", index, next[i]) end
  end
  rcall("SET", sweep, next[#next])
end
local watchId, topic, owner = ARGV[4], ARGV[12], ARGV[14]
local index, sweep = key.watches, key.watchSweep
if ARGV[13] == "refunds" then index, sweep = key.refunds, key.refundSweep end
local created = 0
if rcall("EXISTS", key.watch(watchId)) == 0 then
  if owner ~= "" then
    local count = tonumber(rcall("GET", key.tokenWatches(owner)) or "0")
    if count >= tonumber(ARGV[15]) then return {-1, count} end
    rcall("INCR", key.tokenWatches(owner))
  end
  ensureInternalTopic(topic, ARGV[11])
  rcall("HSET", key.watch(watchId), "${FIELD.spec}", ARGV[5], "${FIELD.notify}", ARGV[9], "${FIELD.metadata}", ARGV[10],
    "${FIELD.state}", "polling", "${FIELD.polls}", 0, "${FIELD.createdAt}", NOW, "${FIELD.deadline}", ARGV[6])
  if owner ~= "" then rcall("HSET", key.watch(watchId), "${FIELD.owner}", owner) end
  -- The sweep goes first: the new entry, the last in start order, would always lie ahead of it.
  sweepWatches(index, sweep)
  rcall("ZADD", index, NOW, watchId)
  addJob("${WATCH_JOB_PREFIX}" .. watchId, topic, tonumber(ARGV[7]), ARGV[5], 60000, 1000000,
    ARGV[8], {})
  created = 1
end
local out = readWatch(watchId)
table.insert(out, 1, created)
return out
`,
  parse(reply) {
    const [created, ...rest] = asArray(reply, "watchStart");
    if (Number(created) === -1) return { tooMany: Number(rest[0]) };
    return { created: Number(created) === 1, watch: readWatch(rest) };
  },
});

export const watchRead = defineScript<WatchRecord | undefined>({
  name: "watchRead",
  lua: `
--[[ watchRead: a watch's fields and when its next poll is due.
  ARGV[4] watch id
  Returns {next poll (ms, or -1), field, value, ...}, or {} when there is no such watch.
  Cost: HGETALL, GET.
]]
${READ}
if rcall("EXISTS", key.watch(ARGV[4])) == 0 then return {} end
return readWatch(ARGV[4])
`,
  parse(reply) {
    const flat = asArray(reply, "watchRead");
    return flat.length === 0 ? undefined : readWatch(flat);
  },
});

/** A page of watches, newest first, and where the next page starts (absent on the last). */
export type WatchList = { watches: WatchRecord[]; cursor?: string };

export const watchList = defineScript<WatchList>({
  name: "watchList",
  lua: `
--[[ watchList: payment (or refund) watches, newest first, a page at a time (the dashboard's
  panel).
  ARGV[4] cursor: "" for the first page, else "<started ms>|<watch id>" of the last one listed
  ARGV[5] most watches   ARGV[6] the index: "watches" (payments, the default) or "refunds"
  Index entries whose watch is gone (its retention ran out) are dropped from the index as met.
  Returns {cursor or "", then per watch: its number of values, then what watchRead returns}.
  Cost: ZRANGE; per entry HGETALL and GET (ZREM for a gone one).
]]
${READ}
local cursor, most = ARGV[4], tonumber(ARGV[5])
local index = key.watches
if ARGV[6] == "refunds" then index = key.refunds end
local top, after = "+inf", nil
if cursor ~= "" then
  local cut = string.find(cursor, "|", 1, true)
  top, after = string.sub(cursor, 1, cut - 1), string.sub(cursor, cut + 1)
end
-- Newest first; among watches started in the same ms, by id, descending. Entries at the
-- cursor's ms up to its id were listed already: at most \`most\` of them are skipped.
local entries = rcall("ZRANGE", index, top, "-inf", "BYSCORE", "REV", "LIMIT", 0, most * 2,
  "WITHSCORES")
local out, listed, last = {""}, 0, nil
for i = 1, #entries, 2 do
  local id, score = entries[i], entries[i + 1]
  local seen = after ~= nil and score == top and id >= after
  if not seen then
    if listed >= most then break end
    last = score .. "|" .. id
    if rcall("EXISTS", key.watch(id)) == 0 then
      rcall("ZREM", index, id)
    else
      local watch = readWatch(id)
      out[#out + 1] = #watch
      for _, value in ipairs(watch) do out[#out + 1] = value end
      listed = listed + 1
    end
  end
end
-- More may follow when the range was full: the next page starts after the last one met.
if #entries == most * 4 and last then out[1] = last end
if listed >= most and last then out[1] = last end
return out
`,
  parse(reply) {
    const flat = asArray(reply, "watchList");
    const watches: WatchRecord[] = [];
    for (let i = 1; i < flat.length; ) {
      const count = Number(flat[i]);
      watches.push(readWatch(flat.slice(i + 1, i + 1 + count)));
      i += 1 + count;
    }
    const cursor = String(flat[0] ?? "");
    return cursor ? { watches, cursor } : { watches };
  },
});

/**
 * What watchPolled did: applied, and how ("late": a late payment told; "duplicate": a
 * notification seen before). `nextPollAt`: when a poll it applied (pending, transient) put the
 * watch's next poll; absent otherwise.
 */
export type WatchPolled = {
  applied: boolean;
  state: string;
  how: "" | "late" | "duplicate";
  nextPollAt?: number;
};

/**
 * Lua: the ended states a late outcome is still told after, as a set: LATE_PAYMENT_AFTER (a
 * payment) and LATE_REFUND_AFTER (a refund). Each kind reaches only its own states (a payment is
 * never abnormal, a refund never failed), so one set serves both.
 */
const LATE_AFTER = `{${[...new Set([...LATE_PAYMENT_AFTER, ...LATE_REFUND_AFTER])]
  .map((state) => `${state} = true`)
  .join(", ")}}`;

/**
 * The outcomes told late: money moved after the watch had given up: a payment's paid (or
 * mismatch), a refund's succeeded.
 */
const LATE_OUTCOMES = ["paid", "mismatch", "succeeded"] as const;
const LATE_TOLD = `{${LATE_OUTCOMES.map((state) => `${state} = true`).join(", ")}}`;

export const watchPolled = defineScript<WatchPolled>({
  name: "watchPolled",
  lua: `
--[[ watchPolled: applies a poll's answer, or a provider's notification, to a watch (a payment's
  or a refund's): the one transition from polling to an outcome, shared by polls and
  notifications, and the one from an ended watch to a late payment (or refund).
  ARGV[4] watch id   ARGV[5] the poll job's receipt, or "" for a notification
  ARGV[6] pending | transient | outcome   ARGV[7] the answer's word: trade state, refund status
  (or the error)   ARGV[8] the outcome state, for an outcome (a payment's paid | closed | failed
  | expired | mismatch; a refund's succeeded | closed | abnormal | expired)
  ARGV[9] the outcome job's body up to its metadata: JSON text ending in "metadata": (the stored
          metadata text and "}" complete it)
  ARGV[10] default ttr (ms)   ARGV[11] default max attempts   (for the outcome jobs)
  ARGV[12] the notification's id (Alipay notify_id, WeChat Pay's event id), or ""
  A notification whose id the watch took before changes nothing ("duplicate"); a new id is
  remembered (the last ${NOTIFY_IDS_KEPT}). A watch still polling: a poll applies only under the
  reservation it was claimed with (a poller that lost its lease changes nothing). pending: the
  next poll is the schedule's next step (at the deadline at the latest; at once when the answer,
  asked before the deadline, is applied past it); transient: soon (5 s,
  doubling, at most 60 s, and never later than the schedule's next step, nor than the deadline
  while it is ahead); outcome: the state and outcome are stored, the poll job finishes and each
  notify topic gets the outcome as the job ${WATCH_JOB_PREFIX}<watch id>:<n> (exactly once: the
  same atomic step). A payment watch ended ${LATE_PAYMENT_AFTER.join(", ")} and a paid or
  mismatch outcome, or a refund watch ended ${LATE_REFUND_AFTER.join(", ")} and a succeeded one,
  from a poll (its lease no longer matters) or a notification: the late outcome, once ("late"):
  the state becomes the outcome's, the outcome (with "late":true) replaces the one kept as
  firstOutcome, and each topic gets it as ${WATCH_JOB_PREFIX}<watch id>:late:<n>.
  An ended watch is kept max(RETENTION, ${ENDED_WATCH_KEEP_MS / 3600_000} h) from its last change.
  Returns {1, new state, how} or {0, state as it was, how} when nothing applied; how is "",
  "late" or "duplicate"; a poll's pending or transient answer adds when the next poll is due
  (-1: none waits), so that the poller claims again only when that falls within its window.
  An outcome ends the watch's count in its owner's tokenWatches (watchStart).
  Cost: HMGET; for a notification with an id, HSET; for a poll, GET (the job); HSET;
  pending/transient: the release's commands; outcome: HGET (the owner; with one HDEL, DECR), the
  job's finish, per topic the add's, PEXPIRE; late: HSET, per topic the add's, PEXPIRE.
]]
${RELEASE_OWNER}
local watchId, receipt, kind, notifyId = ARGV[4], ARGV[5], ARGV[6], ARGV[12]
local wkey = key.watch(watchId)
local jobId = "${WATCH_JOB_PREFIX}" .. watchId
local state, notify, deadline, metadata, outcome, seen = unpack(rcall("HMGET", wkey,
  "${FIELD.state}", "${FIELD.notify}", "${FIELD.deadline}", "${FIELD.metadata}",
  "${FIELD.outcome}", "${FIELD.notified}"))
if not state then return {0, "", ""} end

-- Each notify topic gets the job <jobId><suffix><n> with \`body\`, once (an id that exists is kept).
local function fanOut(suffix, body)
  local defaults = {ttr = tonumber(ARGV[10]), maxAttempts = tonumber(ARGV[11])}
  for n, topic in ipairs(cjson.decode(notify)) do
    addJob(jobId .. suffix .. n, topic, NOW, body, nil, nil, nil, defaults)
  end
  rcall("PEXPIRE", wkey, ${KEEP})
end

if notifyId ~= "" then
  if seen and string.find(" " .. seen .. " ", " " .. notifyId .. " ", 1, true) then
    return {0, state, "duplicate"}
  end
  local ids = {notifyId}
  for id in string.gmatch(seen or "", "%S+") do
    if #ids < ${NOTIFY_IDS_KEPT} then ids[#ids + 1] = id end
  end
  rcall("HSET", wkey, "${FIELD.notified}", table.concat(ids, " "))
end

if state ~= "polling" then
  local moved = kind == "outcome" and (${LATE_TOLD})[ARGV[8]]
  if not (moved and (${LATE_AFTER})[state]) then return {0, state, ""} end
  -- Paid (or refunded) after all: told once, as the state now is the outcome's, so it never is
  -- again.
  local late = ARGV[9] .. (metadata or "null") .. ',"late":true}'
  rcall("HSET", wkey, "${FIELD.state}", ARGV[8], "${FIELD.outcome}", late,
    "${FIELD.lastAnswer}", cjson.encode({tradeState = ARGV[7], at = NOW}))
  if outcome then rcall("HSET", wkey, "${FIELD.firstOutcome}", outcome) end
  fanOut(":late:", late)
  return {1, ARGV[8], "late"}
end

local meta, body, code = nil, nil, CODE.ok
if receipt ~= "" then
  meta, body, code = held(jobId, receipt, "")
  if code ~= CODE.ok then return {0, state, ""} end
  rcall("HINCRBY", wkey, "${FIELD.polls}", 1)
end
rcall("HSET", wkey, "${FIELD.lastAnswer}", cjson.encode({tradeState = ARGV[7], at = NOW}))
if kind ~= "outcome" then
  if receipt == "" then return {1, state, ""} end
  rcall("ZREM", key.reserved(meta.topic), jobId)
  -- This was poll number meta.attempts, which came its schedule's step meta.attempts after the
  -- one before (the first: that step after the start): the next comes one step further.
  local step = backoff(meta.backoff, meta.attempts + 1)
  local wait = step
  if kind == "transient" then
    local streak = rcall("HINCRBY", wkey, "${FIELD.streak}", 1)
    wait = math.min(5000 * 2 ^ (streak - 1), 60000, step)
  else
    rcall("HDEL", wkey, "${FIELD.streak}")
  end
  -- No poll comes after the deadline; past it (a close or query there failed transiently), the
  -- transient wait holds: retrying at once would hammer the provider until the close gives up.
  -- A pending answer past it was asked just before it and applied just after (a slow Redis): the
  -- deadline's question (a close, a last query) is asked at once, not a whole step later.
  if NOW < tonumber(deadline) then
    wait = math.min(wait, tonumber(deadline) - NOW)
  elseif kind ~= "transient" then
    wait = 0
  end
  retry(jobId, meta, body, wait)
  local nextAt = -1
  if meta.state == "waiting" then nextAt = meta.due end
  return {1, state, "", nextAt}
end
-- An outcome: the watch ends, its poll job with it, and each notify topic is told once.
outcome = ARGV[9] .. (metadata or "null") .. "}"
rcall("HSET", wkey, "${FIELD.state}", ARGV[8], "${FIELD.outcome}", outcome, "${FIELD.endedAt}", NOW)
releaseOwner(wkey)
if not meta then meta, body = load(jobId) end
if meta and meta.state ~= "finished" and meta.state ~= "deleted" then
  unindex(jobId, meta)
  meta.state, meta.endedAt, meta.leaseEnd = "finished", NOW, nil
  save(jobId, meta, body)
end
fanOut(":", outcome)
return {1, ARGV[8], ""}
`,
  parse(reply) {
    const [applied, state, how, nextAt] = asArray(reply, "watchPolled");
    const next = Number(nextAt ?? -1);
    return {
      applied: Number(applied) === 1,
      state: String(state ?? ""),
      how: how === "late" || how === "duplicate" ? how : "",
      ...(next >= 0 ? { nextPollAt: next } : {}),
    };
  },
});

export const tokenWatchCounts = defineScript<number[]>({
  name: "tokenWatchCounts",
  lua: `
--[[ tokenWatchCounts: how many watches each token has polling (tokenWatches, watchStart).
  ARGV[4..] token ids
  Returns one count per id, in their order.
  Cost: MGET.
]]
local wanted = {}
for i = 4, #ARGV do wanted[#wanted + 1] = key.tokenWatches(ARGV[i]) end
if #wanted == 0 then return {} end
local counts = rcall("MGET", unpack(wanted))
for i = 1, #wanted do counts[i] = tonumber(counts[i] or "0") end
return counts
`,
  parse(reply) {
    return asArray(reply, "tokenWatchCounts").map((count) => Number(count ?? 0));
  },
});

export const watchStop = defineScript<{ found: boolean; state: string }>({
  name: "watchStop",
  lua: `
--[[ watchStop: stops a watch (DELETE). A polling watch reads "stopped" from then on and its
  poll job is deleted; one that has an outcome keeps it. Kept max(RETENTION,
  ${ENDED_WATCH_KEEP_MS / 3600_000} h) either way (a late payment may still come: watchPolled).
  ARGV[4] watch id
  A polling watch stopped ends its count in its owner's tokenWatches (watchStart).
  Returns {1, state} or {0, ""} when there is no such watch.
  Cost: HGET, GET; for a polling watch HSET, HGET (the owner; with one HDEL, DECR), the job's
  unindex and SET; PEXPIRE (x2).
]]
${RELEASE_OWNER}
local wkey = key.watch(ARGV[4])
local state = rcall("HGET", wkey, "${FIELD.state}")
if not state then return {0, ""} end
if state == "polling" then
  state = "stopped"
  rcall("HSET", wkey, "${FIELD.state}", state, "${FIELD.endedAt}", NOW)
  releaseOwner(wkey)
  local jobId = "${WATCH_JOB_PREFIX}" .. ARGV[4]
  local meta, body = load(jobId)
  if meta and meta.state ~= "deleted" and meta.state ~= "finished" then
    unindex(jobId, meta)
    meta.state, meta.endedAt, meta.leaseEnd = "deleted", NOW, nil
    save(jobId, meta, body)
  end
end
rcall("PEXPIRE", wkey, ${KEEP})
return {1, state}
`,
  parse(reply) {
    const [found, state] = asArray(reply, "watchStop");
    return { found: Number(found) === 1, state: String(state ?? "") };
  },
});
