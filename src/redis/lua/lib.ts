// The Lua every script starts with: arguments, keys, the job record format, shared transitions.
import { BACKOFF_SCHEDULES, MAX_DELAY_SECONDS } from "../../domain/schemas";
import { LUA_KEYS } from "../keys";

/**
 * Width of a slot list, ms. A waiting job whose slot (its due time rounded down to a multiple of
 * this) starts more than SLOT_MS from now waits in that slot's list; the slot "opens" SLOT_MS
 * before it starts, and its ids then move to the delayed zset (lib.ts: migrate).
 */
export const SLOT_MS = 600_000;

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
 * Job records are one string: `<meta>\n<body JSON>`. The body is the client's JSON text, stored
 * and returned byte for byte (Lua never parses it). The meta is positional, `|`-separated, an
 * empty field for an unset one (ids, topics and receipts cannot contain `|`; the backoff spec
 * comes last, so its JSON may contain anything). Fields in order, times in unix ms:
 *   s state: w waiting | r reserved | f finished | d dead | x deleted
 *   i id   t topic   d due   c created   r ttr (ms)   a attempts (reservations so far)
 *   m max attempts   x deadline   u lease end   k receipt   e ended (finished, dead, deleted)
 *   w why it died: attempts | deadline | buried
 *   l "1" on a job deleted while its id sat in a slot list (keys.ts: slots), where it still is
 *   b backoff spec as given (JSON)
 * e.g. `w|order-42|pay|1800000005000|1800000000000|30000|0|10|||||||"wechatpay"`. Positional
 * rather than JSON because a delayed job's record is most of what it costs in memory: this is
 * about 60 bytes shorter per job than the same meta as a JSON object.
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
local SLOT = ${SLOT_MS}               -- ms: width of a slot list (keys.ts: slots)

-- The record format (see the header of lib.ts): positional meta fields, then the body.
local FIELDS = {"s", "i", "t", "d", "c", "r", "a", "m", "x", "u", "k", "e", "w", "l"}
local NUMERIC = {d = true, c = true, r = true, a = true, m = true, x = true, u = true, e = true}
local STATE_OF = {w = "waiting", r = "reserved", f = "finished", d = "dead", x = "deleted"}
local CODE_OF = {waiting = "w", reserved = "r", finished = "f", dead = "d", deleted = "x"}

local function encode(meta)
  local parts = {}
  for n, field in ipairs(FIELDS) do
    local value = meta[field]
    if value == nil then parts[n] = ""
    elseif field == "s" then parts[n] = CODE_OF[value]
    else parts[n] = tostring(value) end
  end
  parts[#FIELDS + 1] = meta.b or ""
  return table.concat(parts, "|")
end

local function decode(raw)
  local cut = string.find(raw, "\\n", 1, true)
  local meta, pos = {}, 1
  for _, field in ipairs(FIELDS) do
    local bar = string.find(raw, "|", pos, true)
    if bar > pos then
      local value = string.sub(raw, pos, bar - 1)
      if NUMERIC[field] then meta[field] = tonumber(value) else meta[field] = value end
    end
    pos = bar + 1
  end
  meta.s = STATE_OF[meta.s]
  if cut > pos then meta.b = string.sub(raw, pos, cut - 1) end
  return meta, string.sub(raw, cut + 1)
end

local function load(id)
  local raw = rcall("GET", key.job(id))
  if not raw then return nil end
  return decode(raw)
end

-- Writes a record and returns it; finished and deleted records expire after RETENTION.
local function save(id, meta, body)
  local raw = encode(meta) .. "\\n" .. body
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

-- How long to wait after the n-th reservation failed (n >= 1), in ms. \`spec\` is the record's
-- backoff JSON (or nil).
local function backoff(spec, n)
  if spec == nil then return 0 end
  spec = cjson.decode(spec)
  if type(spec) == "string" then spec = SCHEDULES[spec] end
  if type(spec) == "number" then return ms(spec) end
  if spec.type == "exponential" then
    local wait = spec.delay * (spec.factor ^ (n - 1))
    return ms(math.min(wait, spec.max or MAX_WAIT))
  end
  return ms(spec[n] or spec[#spec])
end

-- Slots: a job due at \`due\` belongs to the slot starting at slotOf(due). A slot is far while it
-- starts more than SLOT after now, and open from then on.
local function slotOf(due) return due - (due % SLOT) end
local function isFar(due) return slotOf(due) > NOW + SLOT end
local function slotList(topic, slot) return key.slots(topic) .. ":" .. slot end

-- Files ids of a topic under a far slot: the list, the slot index, the count, the schedule
-- (the tick must come when the slot opens).
local function toSlot(topic, slot, ids)
  rcall("RPUSH", slotList(topic, slot), unpack(ids))
  rcall("ZADD", key.slots(topic), slot, slot)
  rcall("INCRBY", key.slotted(topic), #ids)
  rcall("ZADD", key.schedule, "LT", slot - SLOT, topic)
end

-- A waiting job goes to the ready list once due, to its slot list when far, else to the delay
-- bucket.
local function enqueue(id, topic, due)
  if due <= NOW then
    rcall("ZADD", key.ready(topic), due, id)
  elseif isFar(due) then
    toSlot(topic, slotOf(due), {id})
  else
    rcall("ZADD", key.delayed(topic), due, id)
    rcall("ZADD", key.schedule, "LT", due, topic)
  end
end

-- Takes a job out of the index of its state. A waiting job in neither zset has its id in a slot
-- list: that entry stays (removing it would scan the list) and is skipped when the slot opens,
-- and the count of slotted jobs drops now. Returns true for such a job.
local function unindex(id, meta)
  if meta.s == "waiting" then
    local removed = rcall("ZREM", key.delayed(meta.t), id) + rcall("ZREM", key.ready(meta.t), id)
    if removed == 0 then
      rcall("DECR", key.slotted(meta.t))
      return true
    end
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

-- Moves up to \`limit\` ids from the topic's open slot lists (oldest slot first) to the delayed
-- zset; the promote that follows moves the due ones on. An id whose job no longer waits in that
-- slot (deleted, replaced, handed out) is dropped, and so is one whose job is indexed already
-- (an id listed twice; a job replaced to a due time in a slot that was open): a waiting job is
-- always in exactly one index. Returns how many ids it took off the lists.
-- Cost: one ZRANGE; per slot visited LRANGE and LTRIM (or DEL + ZREM when emptied); per id one
-- GET; then ZMSCORE, ZADD, DECRBY, ZADD LT.
local function migrate(topic, limit)
  local slots = rcall("ZRANGE", key.slots(topic), "-inf", NOW + SLOT, "BYSCORE", "LIMIT", 0, 10)
  if #slots == 0 then return 0 end
  local taken, ids, dues, seen = 0, {}, {}, {}
  for _, slot in ipairs(slots) do
    local want = limit - taken
    if want <= 0 then break end
    local list = slotList(topic, slot)
    local listed = rcall("LRANGE", list, 0, want - 1)
    if #listed < want then
      rcall("DEL", list)
      rcall("ZREM", key.slots(topic), slot)
    else
      rcall("LTRIM", list, want, -1)
    end
    taken = taken + #listed
    for _, id in ipairs(listed) do
      local meta = not seen[id] and load(id)
      if meta and meta.s == "waiting" and meta.t == topic and slotOf(meta.d) == tonumber(slot) then
        ids[#ids + 1], dues[#ids + 1], seen[id] = id, meta.d, true
      end
    end
  end
  if #ids == 0 then return taken end
  local inReady = rcall("ZMSCORE", key.ready(topic), unpack(ids))
  local scored, earliest = {}, nil
  for n, id in ipairs(ids) do
    if not inReady[n] then
      scored[#scored + 1] = dues[n]
      scored[#scored + 1] = id
      if earliest == nil or dues[n] < earliest then earliest = dues[n] end
    end
  end
  if #scored == 0 then return taken end
  local indexed = rcall("ZADD", key.delayed(topic), unpack(scored))
  if indexed > 0 then rcall("DECRBY", key.slotted(topic), indexed) end
  rcall("ZADD", key.schedule, "LT", earliest, topic)
  return taken
end

-- The earliest time something of the topic may need looking at (-1: nothing timed): its first
-- delayed job, its first lease end, the opening of its first slot.
local function nextEvent(topic)
  local nextAt = -1
  local function consider(at)
    if at and (nextAt < 0 or at < nextAt) then nextAt = at end
  end
  for _, index in ipairs({key.delayed(topic), key.reserved(topic)}) do
    local first = rcall("ZRANGE", index, 0, 0, "WITHSCORES")
    consider(tonumber(first[2]))
  end
  local slot = rcall("ZRANGE", key.slots(topic), 0, 0, "WITHSCORES")
  if slot[2] then consider(tonumber(slot[2]) - SLOT) end
  return nextAt
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
