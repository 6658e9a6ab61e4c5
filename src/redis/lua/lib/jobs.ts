// Lua: adding a job from a script other than add (payment watches add their polls and outcomes).
import { SCHEDULE_MARKERS } from "../../keys";

/** Needs the record codec, `config`, `enqueue`, `bump` and `key` in scope. */
export const LUA_JOBS = `
-- Appends an entry to home's outbox (scripts/partitions.ts: outboxApply); its first entry puts
-- the schedule's marker up, so the tick looks (redis/routing.ts).
local function outboxPush(entry)
  if rcall("RPUSH", key.outbox, entry) == 1 then
    rcall("ZADD", key.schedule, "LT", NOW, "${SCHEDULE_MARKERS.outbox}")
  end
end

-- addJob in this partition, whatever the topic's and the id's partitions (scripts/partitions.ts:
-- outboxApply, once the id's index entry is written).
local function addHere(id, topic, due, body, ttr, maxAttempts, backoffSpec, defaults)
  local cfg = config(topic)
  local meta = {
    id = id, topic = topic, state = "waiting", due = due, attempts = 0, createdAt = NOW,
    ttr = ttr or (cfg.ttr and cfg.ttr * 1000) or defaults.ttr,
    maxAttempts = maxAttempts or cfg.maxAttempts or defaults.maxAttempts,
  }
  if backoffSpec then
    meta.backoff = backoffSpec
  elseif cfg.backoff ~= nil then
    meta.backoff = cjson.encode(cfg.backoff)
  end
  if not rcall("SET", key.job(id), encode(meta) .. "\\n" .. body, "NX") then return false end
  enqueue(id, topic, due)
  -- delayq's own topics (__payments) are not listed among the users' topics.
  if string.sub(topic, 1, 2) ~= "__" then rcall("ZADD", key.topics, "NX", 0, topic) end
  bump(topic)
  return true
end

-- Adds one job as the add script would: ttr, max attempts and backoff from the arguments, else
-- from the topic's config, else from \`defaults\` ({ttr = ms, maxAttempts = n}); indexed by its due
-- time (claimable when the topic is pushed). An id that exists is left alone: returns false.
-- Cost: SET NX, MGET (the topic's keys: its config), enqueue's, ZADD NX (topics), INCR (seq).
-- On a partitioned deployment a job of another partition's topic, or one whose id needs an index
-- entry in another partition, goes to the outbox instead (one RPUSH; returns true): the service
-- adds it there with its index entry (scripts/partitions.ts: outboxApply).
local function addJob(id, topic, due, body, ttr, maxAttempts, backoffSpec, defaults)
  if topicPartition(topic) ~= PART or idPartition(id) ~= PART then
    outboxPush(cjson.encode({op = "add", id = id, topic = topic, due = due,
      body = body, ttr = ttr or false, maxAttempts = maxAttempts or false,
      backoff = backoffSpec or false, defTtr = defaults.ttr, defMax = defaults.maxAttempts}))
    return true
  end
  return addHere(id, topic, due, body, ttr, maxAttempts, backoffSpec, defaults)
end

-- Takes a job made ahead (a schedule's fire) back if it still waits as made: due at \`due\` in
-- \`topic\`. Its index entry expires as an ended job's would (record.ts: indexEnds).
local function dropHere(id, topic, due)
  local meta = load(id)
  if meta and meta.topic == topic and meta.state == "waiting" and meta.due == due then
    unindex(id, meta)
    rcall("DEL", key.job(id))
    indexEnds(id)
  end
end

-- dropHere, or, for a job addJob sent through the outbox, the same there (outboxApply).
local function dropJob(id, topic, due)
  if topicPartition(topic) ~= PART or idPartition(id) ~= PART then
    outboxPush(cjson.encode({op = "del", id = id, topic = topic, due = due}))
  else
    dropHere(id, topic, due)
  end
end
`;
