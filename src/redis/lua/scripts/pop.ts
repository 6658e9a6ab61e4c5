// pop: reserves up to count due jobs of a topic, earliest due first.
import { CODE } from "../../codes";
import { defineScript, list, record } from "../script";

/**
 * Jobs reserved; or, when none, when to look again and the topic's change counter; or the
 * refusal of a push topic.
 */
export type PopReply =
  | { records: string[] }
  | { records: []; nextAt: number | undefined; seq: number }
  | { records: []; pushTopic: true };

export const pop = defineScript<PopReply>({
  name: "pop",
  lua: `
--[[ pop: reserves up to count due jobs of a topic, the earliest due first.
  First takes back the topic's expired reservations (up to 100), moves the ids of its open slots
  (up to 1000) and promotes its due jobs (up to 1000), so pull consumers never wait for a
  scheduler tick.
  ARGV[4] topic   ARGV[5] count (1-100)   ARGV[6] receipt nonce, unique per call
  Each reservation counts an attempt, leases the job until now + ttr and gets the receipt
  "<nonce>.<n>". A job whose deadline has passed dies instead of being handed out.
  Returns {next, seq, records...}. When nothing was reserved, \`next\` is the earliest time
  something of the topic may become available (a due time, a lease end; -1 for none) and \`seq\`
  the topic's change counter, so a long-polling caller can sleep until then and meanwhile watch
  the counter; otherwise both are -1. A paused topic reserves nothing and answers next -1. A
  push topic answers {CODE.pushTopic}: its jobs are delivered, not popped.
  Cost: GET (config), ZRANGE (reserved), ZRANGE (slots), ZRANGE (delayed; ZREM + ZADD when
  some are due), ZRANGE + ZREM (ready), per job GET + SET, then one ZADD (reserved) and one
  ZADD LT (schedule). When nothing was reserved: three ZRANGEs and a GET instead, for the hint.
]]
local topic, count, nonce = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local function seq() return tonumber(rcall("GET", key.seq(topic)) or "0") end
local function hint() return {nextEvent(topic), seq()} end
local cfg = config(topic)
if type(cfg.push) == "table" then return {CODE.pushTopic} end
-- Paused: nothing becomes available until it resumes, which bumps seq.
if cfg.paused then return {-1, seq()} end
expire(topic, 100)
advance(topic, 1000)
local out = reserveReady(topic, count, nonce)
if #out == 0 then return hint() end
table.insert(out, 1, -1)
table.insert(out, 1, -1)
return out
`,
  parse(reply) {
    const [next, seq, ...records] = list(reply, "pop");
    if (seq === undefined && Number(next) === CODE.pushTopic)
      return { records: [], pushTopic: true };
    if (records.length > 0) return { records: records.map((raw) => record(raw, "pop")) };
    const nextAt = Number(next);
    return { records: [], nextAt: nextAt >= 0 ? nextAt : undefined, seq: Number(seq) };
  },
});
