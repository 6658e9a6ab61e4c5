// The Lua every script starts with: arguments, keys, the job record format, shared transitions.
import { BACKOFF_SCHEDULES, MAX_DELAY_SECONDS } from "../../domain/schemas";
import { LUA_KEYS } from "../keys";

const schedules = Object.entries(BACKOFF_SCHEDULES)
  .map(([name, steps]) => `${name} = {${steps.join(", ")}}`)
  .join(", ");

/**
 * Shared by every script. Every script is called with
 *   KEYS[1]  the schedule key (routes the call to the keyspace's slot)
 *   ARGV[1]  the key base, e.g. "{dq}:"
 *   ARGV[2]  now, unix ms (the caller's clock; scripts never read the time)
 *   ARGV[3]  how long finished and deleted records are kept, ms
 * and takes its own arguments from ARGV[4] on.
 *
 * Job records are one string: `<meta JSON>\n<body JSON>`. The body is the client's JSON text,
 * stored and returned byte for byte (Lua never parses it). Meta fields, times in unix ms:
 *   i id   t topic   s state: waiting | reserved | finished | dead | deleted
 *   d due     r ttr (ms)   a attempts (reservations so far)   m max attempts
 *   b backoff spec as given   x deadline   c created   u lease end   k receipt
 *   e ended (finished, dead, deleted)   w why it died: attempts | deadline | buried
 * A waiting job is reported "ready" once due, "delayed" before.
 */
export const LUA_LIB = `
local rcall = redis.call
local P = ARGV[1]                      -- key base
local NOW = tonumber(ARGV[2])          -- unix ms
local RETENTION = tonumber(ARGV[3])    -- ms
${LUA_KEYS}
local SCHEDULES = {${schedules}}       -- seconds
local MAX_WAIT = ${MAX_DELAY_SECONDS} -- seconds

local function decode(raw)
  local cut = string.find(raw, "\\n", 1, true)
  return cjson.decode(string.sub(raw, 1, cut - 1)), string.sub(raw, cut + 1)
end

local function load(id)
  local raw = rcall("GET", key.job(id))
  if not raw then return nil end
  return decode(raw)
end

-- Writes a record and returns it; finished and deleted records expire after RETENTION.
local function save(id, meta, body)
  local raw = cjson.encode(meta) .. "\\n" .. body
  if meta.s == "finished" or meta.s == "deleted" then
    rcall("SET", key.job(id), raw, "PX", RETENTION)
  else
    rcall("SET", key.job(id), raw)
  end
  return raw
end

local function config(topic)
  local raw = rcall("GET", key.config(topic))
  if raw then return cjson.decode(raw) end
  return {}
end

-- Tells long-polling consumers that something in the topic may be available sooner.
local function bump(topic) rcall("INCR", key.seq(topic)) end

local function ms(seconds) return math.floor(seconds * 1000 + 0.5) end

-- How long to wait after the n-th reservation failed (n >= 1), in ms.
local function backoff(spec, n)
  if spec == nil then return 0 end
  if type(spec) == "string" then spec = SCHEDULES[spec] end
  if type(spec) == "number" then return ms(spec) end
  if spec.type == "exponential" then
    local wait = spec.delay * (spec.factor ^ (n - 1))
    return ms(math.min(wait, spec.max or MAX_WAIT))
  end
  return ms(spec[n] or spec[#spec])
end

-- A waiting job goes to the ready list once due, else to the delay bucket.
local function enqueue(id, topic, due)
  if due <= NOW then
    rcall("ZADD", key.ready(topic), due, id)
  else
    rcall("ZADD", key.delayed(topic), due, id)
    rcall("ZADD", key.schedule, "LT", due, topic)
  end
end

local function unindex(id, meta)
  if meta.s == "waiting" then
    rcall("ZREM", key.delayed(meta.t), id)
    rcall("ZREM", key.ready(meta.t), id)
  elseif meta.s == "reserved" then
    rcall("ZREM", key.reserved(meta.t), id)
  elseif meta.s == "dead" then
    rcall("ZREM", key.dead(meta.t), id)
  end
end

local function kill(id, meta, body, reason)
  meta.s, meta.e, meta.w, meta.u, meta.k = "dead", NOW, reason, nil, nil
  rcall("ZADD", key.dead(meta.t), NOW, id)
  return save(id, meta, body)
end

-- A reservation failed (its lease ran out, or it was released): the job waits \`wait\` ms
-- (default: its backoff step) and is handed out again, or dies when its attempts are used up
-- or the next attempt would fall after its deadline. The caller has unindexed it.
local function retry(id, meta, body, wait)
  if meta.a >= meta.m then return kill(id, meta, body, "attempts") end
  local due = NOW + (wait or backoff(meta.b, meta.a))
  if meta.x and due > meta.x then return kill(id, meta, body, "deadline") end
  meta.s, meta.d, meta.u, meta.k = "waiting", due, nil, nil
  enqueue(id, meta.t, due)
  return save(id, meta, body)
end

-- Moves up to \`limit\` due ids of a topic from its delay bucket to its ready list.
local function promote(topic, limit)
  local due = rcall("ZRANGE", key.delayed(topic), "-inf", NOW, "BYSCORE", "LIMIT", 0, limit,
    "WITHSCORES")
  if #due == 0 then return 0 end
  local ids, scored = {}, {}
  for i = 1, #due, 2 do
    ids[#ids + 1] = due[i]
    scored[#scored + 1] = due[i + 1]
    scored[#scored + 1] = due[i]
  end
  rcall("ZREM", key.delayed(topic), unpack(ids))
  rcall("ZADD", key.ready(topic), unpack(scored))
  return #ids
end

-- Takes back up to \`limit\` reservations of a topic whose lease has ended: failed attempts.
-- Returns how many came back and how many of those died.
local function expire(topic, limit)
  local ids = rcall("ZRANGE", key.reserved(topic), "-inf", NOW, "BYSCORE", "LIMIT", 0, limit)
  if #ids == 0 then return 0, 0 end
  rcall("ZREM", key.reserved(topic), unpack(ids))
  local dead = 0
  for _, id in ipairs(ids) do
    local meta, body = load(id)
    if meta and meta.s == "reserved" then
      retry(id, meta, body)
      if meta.s == "dead" then dead = dead + 1 end
    end
  end
  if dead < #ids then bump(topic) end
  return #ids, dead
end

-- The state a client sees: a waiting job is ready once due.
local function stateOf(meta)
  if meta.s == "waiting" then
    if meta.d <= NOW then return "ready" end
    return "delayed"
  end
  return meta.s
end

-- Whether a caller whose scope is \`scope\` (Lua patterns, one per line; "" for every topic)
-- may act on the topic.
local function allowed(topic, scope)
  if scope == "" then return true end
  for pattern in string.gmatch(scope, "[^\\n]+") do
    if string.find(topic, pattern) then return true end
  end
  return false
end

-- Loads a job the caller must hold. Returns meta, body, 0; or nil-or-meta, body, error code:
-- -1 no such job, -6 its topic is outside the caller's scope, -4 a receipt was given and is not
-- the job's current (or last) one, -3 the job is not reserved.
local function held(id, receipt, scope)
  local meta, body = load(id)
  if not meta then return nil, nil, -1 end
  if not allowed(meta.t, scope) then return nil, nil, -6 end
  if receipt ~= "" and receipt ~= meta.k then return meta, body, -4 end
  if meta.s ~= "reserved" then return meta, body, -3 end
  return meta, body, 0
end
`;
