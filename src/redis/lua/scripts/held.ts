// finish, touch, release, bury: the verbs on a job a consumer holds (one script each).
import { type CodeName, codeName } from "../../codes";
import { asArray, defineScript } from "../script";

/**
 * CODE.ok with the job's record after the change (finish: the word "finished"), or an error code
 * with the job's current state as a client sees it ("" when there is no such job).
 */
export type HeldReply = { code: CodeName; value: string };

function parseHeld(name: string) {
  return (reply: unknown): HeldReply => {
    const [code, value] = asArray(reply, name);
    return { code: codeName(code), value: String(value ?? "") };
  };
}

/** finish's reply: one HeldReply per job, in the order given. */
export type FinishReply = HeldReply[];

/** Up to `count` {code, value} pairs from `flat`, from `start` on (finish; pop's jobs to finish). */
export function heldPairs(flat: readonly unknown[], start: number, count: number): HeldReply[] {
  const replies: HeldReply[] = [];
  for (let i = start; i < flat.length && replies.length < count; i += 2) {
    replies.push({ code: codeName(flat[i]), value: String(flat[i + 1] ?? "") });
  }
  return replies;
}

export const finish = defineScript<FinishReply>({
  name: "finish",
  lua: `
--[[ finish: reserved jobs are done, one or many (a consumer finishing what one pop gave it),
  each as lib/access.ts's finishHeld says (kept RETENTION ms; a retry answers the same; a late
  finish with the last reservation's receipt is accepted). Each job is decided on its own: one
  refused leaves the others finished.
  ARGV[4] scope (lib/access.ts)   ARGV[5], ARGV[6] the first job's id and receipt ("" for
  whoever holds it), ARGV[7], ARGV[8] the second's, and so on.
  Returns {code, value} per job, flat: CODE.ok and "finished", or an error code and the job's
  current state (lib/access.ts: held).
  Cost per job: GET, ZREM (the lease), SET (a late finish: GET, ZREM, ZREM, SET).
]]
local scope, out = ARGV[4], {}
for i = 5, #ARGV - 1, 2 do
  out[#out + 1], out[#out + 2] = finishHeld(ARGV[i], ARGV[i + 1], scope)
end
return out
`,
  parse: (reply: unknown): FinishReply => heldPairs(asArray(reply, "finish"), 0, Infinity),
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
  ARGV[8] "undo": a pop's reservation is undone as if the pop had not taken the job (its attempt
  not counted, its due time kept, ARGV[7] ignored), for a caller that took more than it hands out
  (the ouqiang multi-topic pop); a push claim's is released as without it
  ARGV[9] why the attempt failed (record.ts: errorField), or "": kept as the job's lastError
  (not for an undo, which is no failure)
  Returns {CODE.ok, record}, or {error code, current state}.
  Cost: GET, ZREM, SET, ZADD (+ ZADD LT to the schedule when delayed), MGET (the topic's keys),
  INCR (seq). Undone: GET, ZREM, GET, ZADD, MGET, INCR.
]]
local id, receipt = ARGV[4], ARGV[5]
local meta, body, code, byPop = held(id, receipt, ARGV[6], true)
if code ~= CODE.ok then return {code, meta and stateOf(meta) or ""} end
if byPop and ARGV[8] == "undo" then
  -- A pop wrote no record: the stored one is the job as it was before it (held's take ended the
  -- lease and changed only its own copy).
  local stored = load(id)
  enqueue(id, stored.topic, stored.due)
  bump(stored.topic)
  return {CODE.ok, encode(stored) .. "\\n" .. body}
end
failed(meta, ARGV[9])
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
  ARGV[7] why it failed (record.ts: errorField), or "": kept as the job's lastError
  Returns {CODE.ok, record}, or {error code, current state}.
  Cost: GET, ZREM, ZADD, SET.
]]
local id, receipt = ARGV[4], ARGV[5]
local meta, body, code = held(id, receipt, ARGV[6], true)
if code ~= CODE.ok then return {code, meta and stateOf(meta) or ""} end
failed(meta, ARGV[7])
return {CODE.ok, kill(id, meta, body, "buried")}
`,
  parse: parseHeld("bury"),
});
