// finish, touch, release, bury: the verbs on a job a consumer holds (one script each).
import { type CodeName, codeName } from "../../codes";
import { defineScript, list } from "../script";

/**
 * CODE.ok with the job's record after the change (finish: the word "finished"), or an error code
 * with the job's current state as a client sees it ("" when there is no such job).
 */
export type HeldReply = { code: CodeName; value: string };

function parseHeld(name: string) {
  return (reply: unknown): HeldReply => {
    const [code, value] = list(reply, name);
    return { code: codeName(code), value: String(value ?? "") };
  };
}

export const finish = defineScript<HeldReply>({
  name: "finish",
  lua: `
--[[ finish: a reserved job is done. Its record is kept RETENTION ms for status queries and
  duplicate adds. Finishing it again with its receipt (or none) answers the same, so a client may
  retry a finish whose answer it lost. A late finish — the lease ran out and the job waits for
  its next attempt, nobody has reserved it since — is accepted with that reservation's receipt
  (lib/transitions.ts: retry keeps it), sparing a second run.
  ARGV[4] id   ARGV[5] receipt, or "" for whoever holds it   ARGV[6] scope (lib/access.ts)
  Returns {CODE.ok, "finished"}, or {error code, current state} (lib/access.ts: held).
  Cost: GET, ZREM (the lease), SET (a late finish: GET, ZREM, ZREM, SET).
]]
local id, receipt = ARGV[4], ARGV[5]
local meta, body, code = held(id, receipt, ARGV[6], true)
if code == CODE.notReserved and meta.state == "finished" then
  return {CODE.ok, "finished"}
end
if code == CODE.notReserved and receipt ~= "" and meta.state == "waiting" then
  unindex(id, meta)
elseif code ~= CODE.ok then
  return {code, meta and stateOf(meta) or ""}
end
meta.state, meta.endedAt, meta.leaseEnd = "finished", NOW, nil
save(id, meta, body)
return {CODE.ok, "finished"}
`,
  parse: parseHeld("finish"),
});

export const touch = defineScript<HeldReply>({
  name: "touch",
  lua: `
--[[ touch: extends a reservation: its lease now ends ttr from now, or stays as it was if that
  is later (a caller whose clock is behind never shortens a lease, so the topic's schedule,
  which may hold the old end, is never late for it).
  ARGV[4] id   ARGV[5] receipt or ""   ARGV[6] scope (lib/access.ts)
  Returns {CODE.ok, record}, or {error code, current state}.
  Cost: GET, ZSCORE, ZADD for a pop's reservation (its lease is all there is to change); GET,
  ZADD, SET for a push claim's. (The schedule keeps its earlier time: a lower bound stays valid.)
]]
local id, receipt = ARGV[4], ARGV[5]
local meta, body, code, byPop = held(id, receipt, ARGV[6])
if code ~= CODE.ok then return {code, meta and stateOf(meta) or ""} end
meta.leaseEnd = math.max(meta.leaseEnd or 0, NOW + meta.ttr)
rcall("ZADD", key.reserved(meta.topic), meta.leaseEnd, id)
if byPop then return {CODE.ok, encode(meta) .. "\\n" .. body} end
return {CODE.ok, save(id, meta, body)}
`,
  parse: parseHeld("touch"),
});

export const release = defineScript<HeldReply>({
  name: "release",
  lua: `
--[[ release: gives a reserved job back. It waits \`delay\` (default: its backoff step), or dies
  when its attempts are used up or the wait would end after its deadline.
  ARGV[4] id   ARGV[5] receipt or ""   ARGV[6] scope   ARGV[7] delay, ms, or "" for the backoff step
  Returns {CODE.ok, record}, or {error code, current state}.
  Cost: GET, ZREM, SET, ZADD (+ ZADD LT to the schedule when delayed), MGET (the topic's keys),
  INCR (seq).
]]
local id, receipt = ARGV[4], ARGV[5]
local meta, body, code = held(id, receipt, ARGV[6], true)
if code ~= CODE.ok then return {code, meta and stateOf(meta) or ""} end
local raw = retry(id, meta, body, tonumber(ARGV[7]))
if meta.state == "waiting" then bump(meta.topic) end
return {CODE.ok, raw}
`,
  parse: parseHeld("release"),
});

export const bury = defineScript<HeldReply>({
  name: "bury",
  lua: `
--[[ bury: moves a reserved job to its topic's dead letter.
  ARGV[4] id   ARGV[5] receipt or ""   ARGV[6] scope (lib/access.ts)
  Returns {CODE.ok, record}, or {error code, current state}.
  Cost: GET, ZREM, ZADD, SET.
]]
local id, receipt = ARGV[4], ARGV[5]
local meta, body, code = held(id, receipt, ARGV[6], true)
if code ~= CODE.ok then return {code, meta and stateOf(meta) or ""} end
return {CODE.ok, kill(id, meta, body, "buried")}
`,
  parse: parseHeld("bury"),
});
