// pop: reserves up to count due jobs of a topic, earliest due first.
import { CODE } from "../../codes";
import { defineScript, list, record } from "../script";

/**
 * Jobs reserved; or, when none, when to look again and the topic's change counter; or the
 * refusal of a push topic.
 */
export type PopReply =
  | {
      records: string[];
      more: boolean;
      /** Present when the topic's ready list is empty after this pop: when to look again. */
      drained?: { nextAt: number | undefined; seq: number };
    }
  | { records: []; nextAt: number | undefined; seq: number; registeredUntil: number }
  | { records: []; pushTopic: true };

export const pop = defineScript<PopReply>({
  name: "pop",
  lua: `
--[[ pop: reserves up to count due jobs of a topic, the earliest due first.
  Reads the topic's hash once (config, next, seq). When its \`next\` has passed, pop first does
  the topic's upkeep itself: takes back expired reservations (up to 100), moves the ids of open
  slots (up to 1000) and promotes due jobs (up to 1000), so pull consumers never wait for a
  scheduler tick; otherwise it pays nothing for it.
  ARGV[4] topic   ARGV[5] count (1-100)   ARGV[6] receipt nonce, unique per call
  ARGV[7] how long the caller will wait for a job when none is due, ms (0: it will not)
  ARGV[8] "1" when other callers of the caller's process wait for this topic (see \`more\`)
  Each reservation counts an attempt, leases the job until now + ttr and gets the receipt
  "<nonce>.<n>". A job whose deadline has passed dies instead of being handed out.
  Returns {next, seq, registered} when nothing was reserved: \`next\` is the earliest time
  something of the topic may become available (a due time, a lease end; -1 for none) and \`seq\`
  the topic's change counter, so a long-polling caller can sleep until then and meanwhile watch
  the counter; \`registered\` is until when callers of the topic are registered as waiting (0
  when this one will not wait). Otherwise {more, after, seq, records...}: \`more\` is 1 when more jobs may be ready
  (lib/reserve.ts: a ZCARD settles it when ARGV[8] asks and the pop cannot tell otherwise),
  else 0, and a caller passes the word to its waiters only when more may be ready; \`after\`
  is -2 unless the ready list is known to be empty now, and then what \`next\` would be for an
  empty pop, so that the caller's process knows when to look again without another pop. A caller that will wait
  is registered in the topic's hash (lib/topic.ts: listen), so that adds bump the counter
  while it may be waiting. A paused topic reserves nothing and answers next -1. A push topic
  answers {CODE.pushTopic}: its jobs are delivered, not popped.
  Cost: HMGET (meta); ZPOPMIN (ready); per job GET + SET; one ZADD (reserved), and HSET + ZADD
  LT when the first lease ends before the topic's next. Empty: HMGET and ZPOPMIN only (and an
  HSET about every 100 s of a caller's waiting). Upkeep, when next has passed: see
  lib/upkeep.ts (catchUp): 3 commands when one job falls due and no lease or slot has
  (the job is reserved from there, not written to the ready list first).
]]
local topic, count, nonce, wait = ARGV[4], tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local ask = ARGV[8] == "1"
local meta = rcall("HMGET", key.meta(topic), "config", "next", "seq", "waiting", "lease", "slot")
local cfg = config(topic, meta[1] or false)
knowTiming(topic, meta[2], meta[5], meta[6])
local seq = tonumber(meta[3]) or 0
if type(cfg.push) == "table" then return {CODE.pushTopic} end
-- Paused: nothing becomes available until it resumes, which bumps seq.
if cfg.paused then return {-1, seq, 0} end
local upkeep, bound, fresh = knownNext(topic), nil, nil
if upkeep and upkeep <= NOW then bound, fresh = catchUp(topic) end
local out, more, drained = reserveReady(topic, count, nonce, bound, fresh, ask)
if #out == 0 then
  local registered = 0
  if wait > 0 then registered = listen(topic, meta[4], wait) end
  return {knownNext(topic) or -1, seq, registered}
end
local after = -2
if drained then after = knownNext(topic) or -1 end
table.insert(out, 1, seq)
table.insert(out, 1, after)
table.insert(out, 1, more and 1 or 0)
return out
`,
  parse(reply) {
    const values = list(reply, "pop");
    if (values.length === 1 && Number(values[0]) === CODE.pushTopic)
      return { records: [], pushTopic: true };
    if (values.length === 3) {
      const nextAt = Number(values[0]);
      return {
        records: [],
        nextAt: nextAt >= 0 ? nextAt : undefined,
        seq: Number(values[1]),
        registeredUntil: Number(values[2]),
      };
    }
    const [more, after, seq, ...records] = values;
    const afterAt = Number(after);
    return {
      records: records.map((raw) => record(raw, "pop")),
      more: Number(more) === 1,
      ...(afterAt === -2
        ? {}
        : { drained: { nextAt: afterAt >= 0 ? afterAt : undefined, seq: Number(seq) } }),
    };
  },
});
