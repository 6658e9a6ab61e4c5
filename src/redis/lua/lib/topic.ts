// Lua: a topic's own fields (keys.ts: config, timing, waiting, seq): its config, its long-poll
// signal, and its next upkeep.

/**
 * How long a long-polling caller keeps adds bumping its topic's change counter past the end of
 * its wait, ms, and how close to that end a new wait renews it (lib Lua `listen`).
 */
export const LISTEN_HOLD_MS = 120_000;
export const LISTEN_REFRESH_MS = 30_000;

/** Needs `rcall` and `key` in scope. Comes before the slot lists and transitions, which use it. */
export const LUA_TOPIC = `
-- A topic's own keys, in the order \`fields\` reads them (pop reads them with its records).
local function ownKeys(topic)
  return key.config(topic), key.timing(topic), key.waiting(topic), key.seq(topic)
end

-- topicFields: what this call knows of each topic's fields, read once per call: \`config\` (its JSON, or false),
-- \`next\` (a lower bound of the earliest time something of the topic needs looking at, or false
-- when nothing is timed), \`lease\` and \`slot\` (lower bounds of its first lease end and of its
-- first slot's opening; false for none, nil when not known: pop's upkeep then reads those heads
-- itself, lib/upkeep.ts), \`waiting\` (until when a caller may long-poll it, or false) and \`seq\`
-- (its change counter, nil before its first write).
local topicFields = {}

-- A bound as the timing key writes it: "-" none, "" not known.
local function bound(raw)
  if raw == "-" then return false end
  return tonumber(raw)
end

local function know(topic, raw)
  local t = {config = raw[1] or false, waiting = tonumber(raw[3]) or false, seq = tonumber(raw[4])}
  -- Without a timing key nothing of the topic was ever timed: every lease and slot writes one.
  t.next, t.lease, t.slot = false, false, false
  if raw[2] then
    local nextAt, lease, slot = string.match(raw[2], "^([^|]*)|([^|]*)|([^|]*)$")
    t.next, t.lease, t.slot = bound(nextAt) or false, bound(lease), bound(slot)
  end
  topicFields[topic] = t
  return t
end

-- A topic none of whose keys exist may have its fields in the one hash of an earlier version
-- (keys.ts: legacyMeta): they move into the keys now. Returns them as the keys' MGET would, or
-- nil when there is no such hash.
local function adopt(topic)
  local flat = rcall("HGETALL", key.legacyMeta(topic))
  if #flat == 0 then return nil end
  local h = {}
  for i = 1, #flat, 2 do h[flat[i]] = flat[i + 1] end
  local timing = false
  if h.next or h.lease or h.slot then
    timing = (h.next or "-") .. "|" .. (h.lease or "") .. "|" .. (h.slot or "")
  end
  local raw, args, names = {h.config or false, timing, h.waiting or false, h.seq or false}, {},
    {ownKeys(topic)}
  for i = 1, 4 do
    if raw[i] then
      args[#args + 1], args[#args + 2] = names[i], raw[i]
    end
  end
  if #args > 0 then rcall("MSET", unpack(args)) end
  rcall("DEL", key.legacyMeta(topic))
  return raw
end

-- The topic's fields (see \`topicFields\`), read in one MGET the first time a call asks. \`raw\` is that
-- MGET's reply when the caller read the keys itself (pop, with its records). When none of the
-- keys exists, an earlier version's hash is adopted, unless \`look\` is false: a caller that
-- only reads may then go on with none (a pop that found nothing and will not wait).
local function fields(topic, raw, look)
  if topicFields[topic] then return topicFields[topic] end
  raw = raw or rcall("MGET", ownKeys(topic))
  if not (raw[1] or raw[2] or raw[3] or raw[4]) and look ~= false then
    raw = adopt(topic) or raw
  end
  return know(topic, raw)
end

-- A topic's config, decoded (a new table on every call).
local function config(topic)
  local raw = fields(topic).config
  if raw then return cjson.decode(raw) end
  return {}
end

-- Tells long-polling consumers that something in the topic may be available sooner.
local function bump(topic)
  local t = fields(topic)
  t.seq = rcall("INCR", key.seq(topic))
end

-- A caller will long-poll the topic for up to \`wait\` ms (pop found nothing). The topic's
-- \`waiting\` key then holds a time until which some caller may be waiting, with room for
-- callers' clocks to differ by up to LISTEN_REFRESH; it is written about once per LISTEN_HOLD of
-- waiting, not on every pop. Adds bump the change counter only while it has not passed
-- (scripts/add.ts), so a topic nobody long-polls pays no counter write per job.
local LISTEN_HOLD, LISTEN_REFRESH = ${LISTEN_HOLD_MS}, ${LISTEN_REFRESH_MS}
-- Returns the registration's end as it stands now.
local function listen(topic, wait)
  local t = fields(topic)
  local registered = t.waiting or 0
  if registered < NOW + wait + LISTEN_REFRESH then
    registered = NOW + wait + LISTEN_HOLD
    rcall("SET", key.waiting(topic), registered)
    t.waiting = registered
  end
  return registered
end

-- Whether a caller may be long-polling the topic.
local function listened(topic) return (fields(topic).waiting or -1) >= NOW end

local function knownNext(topic) return fields(topic).next end

-- Writes the topic's timing key from what this call knows.
local function saveTiming(topic, t)
  local out, bounds = {}, {t.next, t.lease, t.slot}
  for n = 1, 3 do
    local at = bounds[n]
    if at == false then
      out[n] = "-"
    elseif at == nil then
      out[n] = ""
    else
      out[n] = string.format("%.17g", at)
    end
  end
  rcall("SET", key.timing(topic), table.concat(out, "|"))
end

-- Something of the topic needs looking at from \`at\` on: a delayed job's due time, or (with
-- \`kind\` "lease" or "slot") a lease's end or a slot's opening. Writes the timing key only when
-- it lowers a bound; the schedule's entry is never later than the next, so it needs a write only
-- when the next is lowered. An unknown lease or slot bound stays unknown.
local function lowerNext(topic, at, kind)
  local t, lowered = fields(topic), false
  if not t.next or at < t.next then
    t.next, lowered = at, true
    rcall("ZADD", key.schedule, "LT", at, topic)
  end
  if kind and t[kind] ~= nil and (t[kind] == false or at < t[kind]) then
    t[kind], lowered = at, true
  end
  if lowered then saveTiming(topic, t) end
end

-- Writes the topic's timing fields as upkeep found them (numbers, or false for none).
local function writeTiming(topic, nextAt, lease, slot)
  local t = fields(topic)
  t.next, t.lease, t.slot = nextAt or false, lease or false, slot or false
  saveTiming(topic, t)
end

-- Sets the topic's timing and its schedule entry exactly (after the tick recomputed them).
local function setNext(topic, at, lease, slot)
  if at and at >= 0 then
    writeTiming(topic, at, lease, slot)
    rcall("ZADD", key.schedule, at, topic)
  else
    writeTiming(topic, false, false, false)
    rcall("ZREM", key.schedule, topic)
  end
end
`;
