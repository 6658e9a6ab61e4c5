// Lua: a topic's own hash (keys.ts: meta): its config, its long-poll signal, and its next upkeep.

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

-- The topic's \`next\` (keys.ts: meta), read once per call: a number, or false when nothing is
-- timed. A caller that read it already hands it over with knowNext.
local nexts = {}
local function knownNext(topic)
  if nexts[topic] == nil then
    nexts[topic] = tonumber(rcall("HGET", key.meta(topic), "next")) or false
  end
  return nexts[topic]
end
local function knowNext(topic, value) nexts[topic] = tonumber(value) or false end

-- Something of the topic needs looking at from \`at\` on. Writes only when that is earlier than
-- the topic's next; the schedule's entry is never later than the next, so it needs no write
-- either then.
local function lowerNext(topic, at)
  local current = knownNext(topic)
  if current and current <= at then return end
  rcall("HSET", key.meta(topic), "next", at)
  rcall("ZADD", key.schedule, "LT", at, topic)
  nexts[topic] = at
end

-- Sets the topic's next and its schedule entry exactly (after upkeep has recomputed it).
local function setNext(topic, at)
  if at and at >= 0 then
    rcall("HSET", key.meta(topic), "next", at)
    rcall("ZADD", key.schedule, at, topic)
    nexts[topic] = at
  else
    rcall("HDEL", key.meta(topic), "next")
    rcall("ZREM", key.schedule, topic)
    nexts[topic] = false
  end
end
`;
