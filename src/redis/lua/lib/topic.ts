// Lua: a topic's own hash (keys.ts: meta): its config, its long-poll signal, and its next upkeep.

/**
 * How long a long-polling caller keeps adds bumping its topic's change counter past the end of
 * its wait, ms, and how close to that end a new wait renews it (lib Lua `listen`).
 */
export const LISTEN_HOLD_MS = 120_000;
export const LISTEN_REFRESH_MS = 30_000;

/** Needs `rcall` and `key` in scope. Comes before the slot lists and transitions, which use it. */
export const LUA_TOPIC = `
-- A topic's config, decoded; \`preread\` is its JSON when the caller has read it already.
local function config(topic, preread)
  local raw = preread
  if raw == nil then raw = rcall("HGET", key.meta(topic), "config") end
  if raw then return cjson.decode(raw) end
  return {}
end

-- Tells long-polling consumers that something in the topic may be available sooner.
local function bump(topic) rcall("HINCRBY", key.meta(topic), "seq", 1) end

-- A caller will long-poll the topic for up to \`wait\` ms (pop found nothing). The hash's
-- \`waiting\` field then holds a time until which some caller may be waiting, with room for
-- callers' clocks to differ by up to LISTEN_REFRESH; it is written about once per LISTEN_HOLD of
-- waiting, not on every pop. \`current\` is the field as the caller read it. Adds bump the
-- change counter only while it has not passed (scripts/add.ts), so a topic nobody long-polls
-- pays no counter write per job.
local LISTEN_HOLD, LISTEN_REFRESH = ${LISTEN_HOLD_MS}, ${LISTEN_REFRESH_MS}
-- Returns the registration's end as it stands now.
local function listen(topic, current, wait)
  local registered = tonumber(current) or 0
  if registered < NOW + wait + LISTEN_REFRESH then
    registered = NOW + wait + LISTEN_HOLD
    rcall("HSET", key.meta(topic), "waiting", registered)
  end
  return registered
end

-- Whether a caller may be long-polling the topic (\`current\`: its \`waiting\` field as read).
local function listened(current) return (tonumber(current) or -1) >= NOW end

-- The topic's timing fields (keys.ts: meta), read once per call. \`next\`: a lower bound of
-- the earliest time something of the topic needs looking at, or false when nothing is timed.
-- \`lease\` and \`slot\`: lower bounds of its first lease end and of its first slot's opening,
-- false when it has none, nil when not known (a hash written before these fields existed):
-- pop's upkeep reads those heads only when their bound has passed or is unknown
-- (lib/upkeep.ts). "-" stands for none in the hash. A caller that read the fields already
-- hands them over with knowTiming.
local timings = {}
local function bound(raw)
  if raw == "-" then return false end
  return tonumber(raw)
end
local function knowTiming(topic, nextRaw, leaseRaw, slotRaw)
  timings[topic] = {
    next = bound(nextRaw) or false, lease = bound(leaseRaw), slot = bound(slotRaw),
  }
  return timings[topic]
end
local function timing(topic)
  if timings[topic] == nil then
    local raw = rcall("HMGET", key.meta(topic), "next", "lease", "slot")
    knowTiming(topic, raw[1], raw[2], raw[3])
  end
  return timings[topic]
end
local function knownNext(topic) return timing(topic).next end

-- Something of the topic needs looking at from \`at\` on: a delayed job's due time, or (with
-- \`kind\` "lease" or "slot") a lease's end or a slot's opening. Writes only the bounds it
-- lowers, in one HSET; the schedule's entry is never later than the next, so it needs a write
-- only when the next is lowered. An unknown lease or slot bound stays unknown.
local function lowerNext(topic, at, kind)
  local t, fields = timing(topic), {}
  if not t.next or at < t.next then
    fields[#fields + 1], fields[#fields + 2], t.next = "next", at, at
    rcall("ZADD", key.schedule, "LT", at, topic)
  end
  if kind and t[kind] ~= nil and (t[kind] == false or at < t[kind]) then
    fields[#fields + 1], fields[#fields + 2], t[kind] = kind, at, at
  end
  if #fields > 0 then rcall("HSET", key.meta(topic), unpack(fields)) end
end

-- Writes the topic's timing fields as upkeep found them (numbers, or false for none).
local function writeTiming(topic, nextAt, lease, slot)
  rcall("HSET", key.meta(topic), "next", nextAt or "-", "lease", lease or "-", "slot", slot or "-")
  knowTiming(topic, nextAt or "-", lease or "-", slot or "-")
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
