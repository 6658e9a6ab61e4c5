// A partitioned deployment's bookkeeping (redis/partitions.ts, redis/routing.ts): where a job id
// lives, the jobs scripts wrote for other partitions (the outbox), the index entries to expire.
import { SCHEDULE_MARKERS } from "../../keys";
import { asArray, defineScript } from "../script";

/**
 * How long an id's index entry stands without its job (an add between its two steps), ms: far
 * longer than an add's two calls take (DQ_REDIS_TIMEOUT_MS each).
 */
export const CLAIM_WINDOW_MS = 30_000;

/**
 * Where each id lives, or will: its partition's number as text. Called in the ids' partition
 * before an add writes them.
 */
export const idClaim = defineScript<string[]>({
  name: "idClaim",
  lua: `
--[[ idClaim: claims job ids for the partition of the topic an add writes them to.
  ARGV[4..] triples: id, the partition its topic is in, and a partition the caller found holds
            no record of it ("" for none): an index entry naming that one, written more than
            ${CLAIM_WINDOW_MS / 1000} s ago, is stale (its job ended and expired, or an add stopped between its
            two steps) and is taken over. A younger one may be an add in flight: it stands.
  An id with neither an index entry nor a record here is free: it is claimed, its entry
  "<partition>|<ms>" written (also when that partition is this one, so that a concurrent claim
  for another topic sees it). Otherwise it lives where its entry or its record says, which the
  caller's add then meets as the id taken (or, the same partition, as a retry of its own add).
  Returns per id the partition it lives in.
  Cost: per id GET, EXISTS when no entry, SET when claimed.
]]
local out = {}
for i = 4, #ARGV, 3 do
  local id, target, stale = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local entry = rcall("GET", key.jobIndex(id))
  local at, since = nil, 0
  if entry then
    at, since = string.match(entry, "^(%d+)|?(%d*)$")
    since = tonumber(since) or 0
  end
  if not entry and rcall("EXISTS", key.job(id)) == 1 then
    out[#out + 1] = tostring(PART)
  elseif entry and not (at == stale and NOW - since > ${CLAIM_WINDOW_MS}) then
    out[#out + 1] = at
  else
    rcall("SET", key.jobIndex(id), target .. "|" .. NOW)
    out[#out + 1] = target
  end
end
return out
`,
  parse: (reply) => asArray(reply, "idClaim").map(String),
});

/** The partition each id lives in, by its index entry (this partition when it has none). */
export const idWhere = defineScript<string[]>({
  name: "idWhere",
  lua: `
--[[ idWhere: where job ids live.
  ARGV[4..] ids (of this partition: redis/partitions.ts ofId)
  Returns per id its index entry, or this partition's number when it has none (its job, if any,
  is here). Changes nothing.
  Cost: MGET.
]]
local names, out = {}, {}
for i = 4, #ARGV do names[#names + 1] = key.jobIndex(ARGV[i]) end
local found = rcall("MGET", unpack(names))
for i = 1, #names do out[i] = (found[i] and string.match(found[i], "^%d+")) or tostring(PART) end
return out
`,
  parse: (reply) => asArray(reply, "idWhere").map(String),
});

/** Gives ended jobs' index entries the records' retention; answers how many it took. */
export const idForget = defineScript<number>({
  name: "idForget",
  lua: `
--[[ idForget: index entries of jobs that ended expire when their records do.
  ARGV[4..] ids   Cost: PEXPIRE per id.   Returns how many had an entry.
]]
local n = 0
for i = 4, #ARGV do n = n + rcall("PEXPIRE", key.jobIndex(ARGV[i]), RETENTION) end
return n
`,
  parse: Number,
});

/** Takes up to ARGV[4] ids from the list of jobs that ended (key.ended). */
export const endedTake = defineScript<string[]>({
  name: "endedTake",
  lua: `
--[[ endedTake: ARGV[4] most ids.   Returns the ids taken off key.ended (LPOP); the schedule's
  marker goes once the list is empty (fewer than ARGV[4] were there).   Cost: LPOP (ZREM).
]]
local most = tonumber(ARGV[4])
local ids = rcall("LPOP", key.ended, most) or {}
if #ids < most then rcall("ZREM", key.schedule, "${SCHEDULE_MARKERS.ended}") end
return ids
`,
  parse: (reply) => (reply === null ? [] : asArray(reply, "endedTake").map(String)),
});

/** The outbox's first ARGV[4] entries, left in place until outboxDone. */
export const outboxRead = defineScript<string[]>({
  name: "outboxRead",
  lua: `
--[[ outboxRead: ARGV[4] most.   Returns the outbox's first entries (JSON).   Cost: LRANGE. ]]
return rcall("LRANGE", key.outbox, 0, tonumber(ARGV[4]) - 1)
`,
  parse: (reply) => asArray(reply, "outboxRead").map(String),
});

/** Removes entries applied (one each: a copy another caller applied too is gone either way). */
export const outboxDone = defineScript<number>({
  name: "outboxDone",
  lua: `
--[[ outboxDone: ARGV[4..] entries.   Returns how many were removed; the schedule's marker goes
  once the outbox is empty.   Cost: LREM per entry, LLEN (ZREM).
]]
local n = 0
for i = 4, #ARGV do n = n + rcall("LREM", key.outbox, 1, ARGV[i]) end
if rcall("LLEN", key.outbox) == 0 then rcall("ZREM", key.schedule, "${SCHEDULE_MARKERS.outbox}") end
return n
`,
  parse: Number,
});

export type OutboxPushed = { topic: string; via: "direct" | "qstash"; dueAt: number };

/**
 * Applies outbox entries in the partition of their topic: adds a job (lib/jobs.ts: addHere; an
 * id that exists is left alone) or takes a schedule's fire back. Answers the push topics written.
 */
export const outboxApply = defineScript<OutboxPushed[]>({
  name: "outboxApply",
  lua: `
--[[ outboxApply: applies outbox entries here, their topics' partition (their ids' index
  entries claimed first, scripts/partitions.ts: idClaim).
  ARGV[4..] entries (JSON): {op = "add", id, topic, due, body, ttr, maxAttempts, backoff,
            defTtr, defMax}, as lib/jobs.ts addJob takes them; or {op = "del", id, topic, due}: a
            schedule's fire taken back if it still waits as made (scripts/schedules.ts).
  Returns three values per push topic a job was added to: topic, via, due (ms).
  Cost: per add addJob's; per del GET and unindex's, DEL.
]]
local out = {}
for i = 4, #ARGV do
  local e = cjson.decode(ARGV[i])
  if e.op == "add" then
    local added = addHere(e.id, e.topic, e.due, e.body, e.ttr or nil, e.maxAttempts or nil,
      e.backoff or nil, {ttr = e.defTtr, maxAttempts = e.defMax})
    local push = config(e.topic).push
    if added and type(push) == "table" then
      out[#out + 1] = e.topic
      out[#out + 1] = push.via or "direct"
      out[#out + 1] = e.due
    end
  else
    dropHere(e.id, e.topic, e.due)
  end
end
return out
`,
  parse(reply) {
    const flat = asArray(reply, "outboxApply");
    const out: OutboxPushed[] = [];
    for (let i = 0; i < flat.length; i += 3) {
      out.push({
        topic: String(flat[i]),
        via: flat[i + 1] === "qstash" ? "qstash" : "direct",
        dueAt: Number(flat[i + 2]),
      });
    }
    return out;
  },
});

/**
 * The partitions Redis holds this deployment's keys in: the stored mark; else, when a start with
 * more than one finds none and no data of one keyspace, its own count, marked now.
 */
export const layoutMark = defineScript<number>({
  name: "layoutMark",
  lua: `
--[[ layoutMark: ARGV[4] the partitions this start is set to.
  Returns the partitions the keys are in: the mark (key.layout) when there is one; else 1 when
  this start has one, or when home holds data written with one (topics, watches, schedules);
  else ARGV[4], marked now. Cost: GET; EXISTS and SET at a first start with more than one.
]]
local stored = rcall("GET", key.layout)
if stored then return tonumber(stored) end
local n = tonumber(ARGV[4])
if n == 1 or rcall("EXISTS", key.topics, key.watches, key.refunds, key.scheduleNames) > 0 then
  return 1
end
rcall("SET", key.layout, n)
return n
`,
  parse: Number,
});
