// pop: reserves up to count due jobs of a topic, earliest due first.
import { CODE } from "../../codes";
import { asArray, defineScript, record } from "../script";
import { type HeldReply, heldPairs } from "./held";

/**
 * Jobs reserved; or, when none, when to look again and the topic's change counter; or the
 * refusal of a push topic. Each with what became of the jobs given to finish first.
 */
export type PopReply = { finished: HeldReply[] } & (
  | {
      records: string[];
      more: boolean;
      /** Present when the topic's ready list is empty after this pop: when to look again. */
      drained?: { nextAt: number | undefined; seq: number };
    }
  | { records: []; nextAt: number | undefined; seq: number; registeredUntil: number }
  | { records: []; pushTopic: true }
);

export const pop = defineScript<PopReply>({
  name: "pop",
  lua: `
--[[ pop: reserves up to count due jobs of a topic, the earliest due first.
  Takes the ready list's first \`count\` entries, then reads the topic's own keys and their
  records in one MGET. When the topic's \`next\` has passed, pop first does the topic's upkeep
  itself: takes back expired reservations (up to 100), moves the ids of open slots (up to 1000)
  and promotes due jobs (up to 1000), so pull consumers never wait for a scheduler tick;
  otherwise it pays nothing for it. Entries taken and not handed out go back in place: on a
  paused or push topic, and when the upkeep wrote jobs to the ready list (they may come first;
  the pop then takes the list's first entries again).
  ARGV[4] topic   ARGV[5] count (1-100)
  ARGV[6] how long the caller will wait for a job when none is due, ms (0: it will not)
  ARGV[7] "1" when other callers of the caller's process wait for this topic (see \`more\`)
  ARGV[8] the caller's scope (lib/access.ts)   ARGV[9], ARGV[10] the id and receipt of a job
  to finish first ("" for whoever holds it), ARGV[11], ARGV[12] the next one's, and so on: a
  consumer finishes what its last pop gave it in the call that takes the next (as BullMQ's
  worker and JetStream's AckNext do), each decided as the finish script would. They are
  finished before the pop takes anything, so a late finish never races this pop's own entries.
  Each reservation counts an attempt and leases the job until now + ttr. It is the job's entry
  in the lease zset only: the record stays as it was, and the receipt is derived from it
  (lib/transitions.ts: reserve). A job whose deadline has passed dies instead of being handed
  out.
  Every reply opens with {n, code, value, ...}: the number of jobs given to finish and, for
  each, CODE.ok and "finished" or an error code and its state (lib/access.ts: finishHeld).
  Then {next, seq, registered} when nothing was reserved: \`next\` is the earliest time
  something of the topic may become available (a due time, a lease end; -1 for none) and \`seq\`
  the topic's change counter, so a long-polling caller can sleep until then and meanwhile watch
  the counter; \`registered\` is until when callers of the topic are registered as waiting (0
  when this one will not wait). Otherwise {more, after, seq, records...}: \`more\` is 1 when
  more jobs may be ready (lib/reserve.ts: a ZCARD settles it when ARGV[7] asks and the pop
  cannot tell otherwise), else 0, and a caller passes the word to its waiters only when more may
  be ready; \`after\` is -2 unless the ready list is known to be empty now, and then what \`next\`
  would be for an empty pop, so that the caller's process knows when to look again without
  another pop. A caller that will wait is registered (lib/topic.ts: listen), so that adds bump
  the counter while it may be waiting. A paused topic reserves nothing and answers next -1. A
  push topic answers {CODE.pushTopic}: its jobs are delivered, not popped.
  Cost: finishing each job given, as finish; then ZPOPMIN (ready); MGET (the topic's keys and the records); one ZADD (reserved), and SET
  (timing) + ZADD LT when the first lease ends before the topic's next.
  Empty: ZPOPMIN and MGET only (and a SET about every 100 s of a caller's waiting). Upkeep, when
  next has passed: see lib/upkeep.ts (catchUp): 3 commands when one job falls due and no lease
  or slot has (the job is reserved from there, not written to the ready list first), and a GET
  for its record.
]]
local topic, count, wait = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local ask = ARGV[7] == "1"
local finished = {0}
for i = 9, #ARGV - 1, 2 do
  finished[1] = finished[1] + 1
  finished[#finished + 1], finished[#finished + 2] = finishHeld(ARGV[i], ARGV[i + 1], ARGV[8])
end
-- The reply, after what became of the jobs to finish.
local function answer(reply)
  for i = 1, #reply do finished[#finished + 1] = reply[i] end
  return finished
end
local popped = rcall("ZPOPMIN", key.ready(topic), count)
local names = {ownKeys(topic)}
for i = 1, #popped, 2 do names[#names + 1] = key.job(popped[i]) end
local read = rcall("MGET", unpack(names))
-- A topic that was never written to needs no adopting when nothing is done with it.
local t = fields(topic, read, #popped > 0 or wait > 0)
-- The records read, by id. They stay valid through the upkeep below, which rewrites only
-- records of reservations it takes back, never of a job in the ready list.
local records = {}
for i = 1, #popped, 2 do
  local raw = read[4 + (i + 1) / 2]
  if raw then records[popped[i]] = raw end
  popping[popped[i]] = true
end

-- Puts the entries taken back as they were.
local function putBack()
  if #popped == 0 then return end
  local back = {}
  for i = 1, #popped, 2 do back[#back + 1], back[#back + 2] = popped[i + 1], popped[i] end
  rcall("ZADD", key.ready(topic), unpack(back))
  popped = {}
end

local cfg = config(topic)
if type(cfg.push) == "table" then
  putBack()
  return answer({CODE.pushTopic})
end
-- Paused: nothing becomes available until it resumes, which bumps seq.
if cfg.paused then
  putBack()
  return answer({-1, t.seq or 0, 0})
end
local upkeep, bound, fresh, wrote = knownNext(topic), nil, nil, false
if upkeep and upkeep <= NOW then bound, fresh, wrote = catchUp(topic) end
-- Jobs the upkeep wrote to the ready list may come before the entries taken: pop again.
if wrote then putBack() end
local out, more, drained = reserveReady(topic, count, bound, fresh, ask,
  not wrote and popped or nil, records)
if #out == 0 then
  local registered = 0
  if wait > 0 then registered = listen(topic, wait) end
  return answer({knownNext(topic) or -1, t.seq or 0, registered})
end
local after = -2
if drained then after = knownNext(topic) or -1 end
local reply = {more and 1 or 0, after, t.seq or 0}
for i = 1, #out do reply[#reply + 1] = out[i] end
return answer(reply)
`,
  parse(reply) {
    const all = asArray(reply, "pop");
    const n = Number(all[0]);
    const finished = heldPairs(all, 1, n);
    const values = all.slice(1 + 2 * n);
    if (values.length === 1 && Number(values[0]) === CODE.pushTopic)
      return { finished, records: [], pushTopic: true };
    if (values.length === 3) {
      const nextAt = Number(values[0]);
      return {
        finished,
        records: [],
        nextAt: nextAt >= 0 ? nextAt : undefined,
        seq: Number(values[1]),
        registeredUntil: Number(values[2]),
      };
    }
    const [more, after, seq, ...records] = values;
    const afterAt = Number(after);
    return {
      finished,
      records: records.map((raw) => record(raw, "pop")),
      more: Number(more) === 1,
      ...(afterAt === -2
        ? {}
        : { drained: { nextAt: afterAt >= 0 ? afterAt : undefined, seq: Number(seq) } }),
    };
  },
});
