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
local function listen(topic, current, wait)
  if (tonumber(current) or 0) < NOW + wait + LISTEN_REFRESH then
    rcall("HSET", key.meta(topic), "waiting", NOW + wait + LISTEN_HOLD)
  end
end

-- Whether a caller may be long-polling the topic (\`current\`: its \`waiting\` field as read).
local function listened(current) return (tonumber(current) or -1) >= NOW end

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
