// reschedule, promote: a waiting job's due time changed (BullMQ's changeDelay and promote).
import { type CodeName, codeName } from "../../codes";
import { asArray, defineScript } from "../script";

/**
 * CODE.ok and the record after the change, or an error code and what explains it. `via`: the job
 * is a push topic's, delivered so (its caller may dispatch at once, as after an add).
 */
export type MoveReply = { code: CodeName; value: string; via?: "direct" | "qstash" };

function parseMove(name: string) {
  return (reply: unknown): MoveReply => {
    const [code, value, via] = asArray(reply, name);
    const out: MoveReply = { code: codeName(code), value: String(value ?? "") };
    if (via === "direct" || via === "qstash") out.via = via;
    return out;
  };
}

/**
 * Lua both scripts run: moves a waiting job to a new due time, out of whichever index holds it
 * (delayed zset, ready list, or a slot list: that entry stays, and is skipped when the slot
 * opens, lib/slots.ts migrate) and into the one its new time calls for (lib/transitions.ts:
 * enqueue), in one script, so that no pop, tick or push claim sees it in between or twice.
 */
const MOVE = `
-- \`onlyDelayed\`: refuse a job already due (promote). Returns a code and the record, or the
-- state a client sees (invalidState; "" for a missing job) or the deadline (pastDeadline); and
-- for a push topic's job moved, how its topic delivers.
local function move(id, scope, due, onlyDelayed)
  local meta, body = load(id)
  if not meta then return CODE.notFound, "" end
  if not allowed(meta.topic, scope) then return CODE.forbidden, "" end
  if meta.state ~= "waiting" then return CODE.invalidState, stateOf(meta) end
  local topic = meta.topic
  if onlyDelayed and meta.due <= NOW then
    if reservedByPop(id, meta) then return CODE.invalidState, "reserved" end
    return CODE.invalidState, "ready"
  end
  if meta.deadline and due > meta.deadline then return CODE.pastDeadline, meta.deadline end
  if rcall("ZREM", key.delayed(topic), id) == 0 and rcall("ZREM", key.ready(topic), id) == 0 then
    -- In neither: a pop reserved it (its record still reads waiting), or it waits in a slot list.
    if reservedByPop(id, meta) then return CODE.invalidState, "reserved" end
    rcall("DECR", key.slotted(topic))
  end
  meta.due = due
  enqueue(id, topic, due)
  -- Long-polling consumers of the topic learn of a job that is ready now.
  if due <= NOW and listened(topic) then bump(topic) end
  local push, via = config(topic).push, ""
  if type(push) == "table" then via = push.via or "direct" end
  return CODE.ok, save(id, meta, body), via
end
`;

export const reschedule = defineScript<MoveReply>({
  name: "reschedule",
  lua: `
--[[ reschedule: a delayed or ready job gets a new due time (a ready one goes back to waiting if
  the time is ahead); its attempts, body and receipt history stay. It is never handed out (pop,
  push claim) before the new time, and is in exactly one index throughout.
  ARGV[4] id   ARGV[5] scope (lib/access.ts)   ARGV[6] the new due time, ms ("+<ms>": that
  long after now)
  Returns {CODE.ok, record, "direct" | "qstash" for a push topic's job, else ""};
  {CODE.invalidState, state} for a job neither delayed nor ready
  (reserved, by a pop or a push claim; finished, dead, deleted); {CODE.pastDeadline, deadline}
  when the time is after the job's deadline; {CODE.notFound} or {CODE.forbidden}.
  Cost: GET, ZREM (delayed; ZREM ready when not there; then ZSCORE reserved and DECR slotted for
  a job in a slot list), ZSCORE (push topic?), then where it goes: the ready list ZADD; the
  delayed zset ZADD, MGET (the topic's keys; + SET timing and ZADD LT schedule when it is due
  before the topic's next); a far slot RPUSH, ZADD, INCRBY, MGET (+ the same); then SET. A push
  topic's job two ZADD LT more (claims, schedule); a job made due now MGET and, while a caller
  long-polls the topic, INCR.
]]
${MOVE}
local due = tonumber(ARGV[6])
if string.sub(ARGV[6], 1, 1) == "+" then due = NOW + tonumber(string.sub(ARGV[6], 2)) end
return {move(ARGV[4], ARGV[5], due, false)}
`,
  parse: parseMove("reschedule"),
});

export const promote = defineScript<MoveReply>({
  name: "promote",
  lua: `
--[[ promote: a delayed job is made ready now (its due time becomes now). A job already due or
  in another state is refused.
  ARGV[4] id   ARGV[5] scope (lib/access.ts)
  Returns {CODE.ok, record, via} as reschedule; {CODE.invalidState, state} for a job that is not
  delayed;
  {CODE.notFound} or {CODE.forbidden}.
  Cost: GET, ZREM (delayed; ZREM ready, ZSCORE reserved, DECR slotted for a job in a slot list),
  ZSCORE (push topic?), ZADD (ready), MGET (the topic's keys), SET; INCR while a caller
  long-polls the topic; a push topic's job two ZADD LT more (claims, schedule).
]]
${MOVE}
return {move(ARGV[4], ARGV[5], NOW, true)}
`,
  parse: parseMove("promote"),
});
