// Lua every script starts with: its arguments, the keys, the codes, then the shared helpers.
import { LUA_CODES } from "../../codes";
import { LUA_KEYS, WATCH_JOB_PREFIX } from "../../keys";
import { LUA_RECORD } from "../../record";
import { LUA_ACCESS } from "./access";
import { LUA_JOBS } from "./jobs";
import { LUA_RESERVE } from "./reserve";
import { LUA_SLOTS, MIGRATE_SLOTS, SLOT_LEAD_MS, SLOT_MS, SLOT_PHASE_MS } from "./slots";
import { LUA_TOPIC } from "./topic";
import { LUA_TRANSITIONS } from "./transitions";
import { LUA_UPKEEP } from "./upkeep";

export { MIGRATE_SLOTS, SLOT_LEAD_MS, SLOT_MS, SLOT_PHASE_MS };

/**
 * Shared by every script. Every script is called with
 *   KEYS[1]  the schedule key (routes the call to the keyspace's slot)
 *   ARGV[1]  the key base, e.g. "{dq}:"
 *   ARGV[2]  now, unix ms; or "" for Redis's own clock (TIME, read once, only by a script that
 *            uses NOW): every caller then compares and writes times on the one clock, so
 *            callers' clocks that disagree cannot (README: How it works, one clock). Tests
 *            with a clock of their own pass it here.
 *   ARGV[3]  how long finished and deleted records are kept, ms; on a partitioned deployment
 *            (redis/partitions.ts) followed by " <this partition> <partitions>"
 * and takes its own arguments from ARGV[4] on. Helpers come in dependency order: the record
 * codec, the topic's own keys, the slot lists, the transitions, pop's upkeep and reservations,
 * access checks, jobs written by other scripts.
 */
export const LUA_LIB = `
local rcall = redis.call
local P = ARGV[1]                      -- key base
-- Redis's clock, unix ms (TIME answers seconds and microseconds).
local function serverNow()
  local t = rcall("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local NOW = tonumber(ARGV[2]) or serverNow() -- unix ms
local RETENTION = tonumber(string.match(ARGV[3], "^%d+")) -- ms
-- This call's partition and how many the deployment has (redis/partitions.ts).
local PART = tonumber(string.match(ARGV[3], "^%d+ (%d+) %d+$")) or 0
local PARTS = tonumber(string.match(ARGV[3], "^%d+ %d+ (%d+)$")) or 1
-- djb2 over the id's bytes, modulo 2^32 (exact in Lua's doubles; no bit library needed). Four
-- bytes a step: below 2^32 * 33^4 + 255 * 33^4 < 2^53, so one modulo per four bytes gives what
-- one per byte would, at half the time.
local function idHash(id)
  local h, n, i = 5381, #id, 1
  while i + 3 <= n do
    local a, b, c, d = string.byte(id, i, i + 3)
    h = ((((h * 33 + a) * 33 + b) * 33 + c) * 33 + d) % 4294967296
    i = i + 4
  end
  for j = i, n do h = (h * 33 + string.byte(id, j)) % 4294967296 end
  return h
end
-- The partition of a topic and of a job id, as redis/partitions.ts computes them: Fibonacci
-- hashing of djb2 (the fractional part of it times 1/φ, times the partitions).
local function spread(name)
  local x = idHash(name) * 0.6180339887498949
  return math.floor((x - math.floor(x)) * PARTS)
end
local function topicPartition(topic)
  if PARTS == 1 or string.sub(topic, 1, 2) == "__" then return 0 end
  return spread(topic)
end
local function idPartition(id)
  if PARTS == 1 or string.sub(id, 1, ${WATCH_JOB_PREFIX.length}) == "${WATCH_JOB_PREFIX}" then return 0 end
  return spread(id)
end
${LUA_KEYS}
${LUA_CODES}
${LUA_RECORD}
${LUA_TOPIC}
${LUA_SLOTS}
${LUA_TRANSITIONS}
${LUA_UPKEEP}
${LUA_RESERVE}
${LUA_ACCESS}
${LUA_JOBS}
`;
