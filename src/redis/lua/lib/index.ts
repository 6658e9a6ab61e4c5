// Lua every script starts with: its arguments, the keys, the codes, then the shared helpers.
import { LUA_CODES } from "../../codes";
import { LUA_KEYS } from "../../keys";
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
 *   ARGV[3]  how long finished and deleted records are kept, ms
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
local RETENTION = tonumber(ARGV[3])    -- ms
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
