// kick and deleteDead: the dead letter's retry and purge.
import { defineScript } from "../script";

/** Picks dead jobs of a topic: by count (oldest first) or by the ids given. */
const DEAD_SELECTION = `
local topic, count = ARGV[4], tonumber(ARGV[5])
local ids = {}
if count then
  ids = rcall("ZRANGE", key.dead(topic), 0, count - 1)
else
  for i = 6, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local done = 0
`;

export const kick = defineScript<number>({
  name: "kick",
  lua: `
--[[ kick: dead jobs of a topic back to its ready list, attempts reset to 0.
  ARGV[4] topic   ARGV[5] count (oldest first), or "" when ids are given   ARGV[6..] ids (≤ 1000)
  Ids that are not dead jobs of this topic are skipped. Returns how many were kicked. A push
  topic's kicked jobs are claimable at once.
  Cost: ZRANGE (by count), per job GET, ZREM, ZADD, SET; MGET (the topic's keys) and INCR (seq);
  ZSCORE (push?), and
  for a push topic two ZADD LT.
]]
${DEAD_SELECTION}
for _, id in ipairs(ids) do
  local meta, body = load(id)
  if meta and meta.topic == topic and meta.state == "dead" then
    rcall("ZREM", key.dead(topic), id)
    meta.state, meta.attempts, meta.due, meta.endedAt, meta.deadReason = "waiting", 0, NOW, nil, nil
    rcall("ZADD", key.ready(topic), NOW, id)
    save(id, meta, body)
    done = done + 1
  end
end
if done > 0 then
  bump(topic)
  if isPush(topic) then claimable(topic, NOW) end
end
return done
`,
  parse: Number,
});

export const deleteDead = defineScript<number>({
  name: "deleteDead",
  lua: `
--[[ deleteDead: deletes dead jobs of a topic (the dead letter's purge).
  ARGV[4] topic   ARGV[5] count (oldest first), or "" when ids are given   ARGV[6..] ids (≤ 1000)
  Ids that are not dead jobs of this topic are skipped. Returns how many were deleted.
  Cost: ZRANGE (by count), per job GET, ZREM, SET.
]]
${DEAD_SELECTION}
for _, id in ipairs(ids) do
  local meta, body = load(id)
  if meta and meta.topic == topic and meta.state == "dead" then
    rcall("ZREM", key.dead(topic), id)
    meta.state, meta.endedAt = "deleted", NOW
    save(id, meta, body)
    done = done + 1
  end
end
return done
`,
  parse: Number,
});
