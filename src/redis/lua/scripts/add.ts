// add: adds jobs (one or a batch), idempotently by id.
import { type CodeName, codeName } from "../../codes";
import { asArray, defineScript, record } from "../script";

/** Fields per job in the add script's ARGV. */
export const ADD_FIELDS = 9;

export type AddReply = {
  jobs: { code: CodeName; record: string }[];
  /** The push topics written to: how they deliver and their earliest due job written. */
  pushed: { topic: string; via: "direct" | "qstash"; dueAt: number }[];
};

export const add = defineScript<AddReply>({
  name: "add",
  lua: `
--[[ add: adds jobs (one or a batch), idempotently by id.
  ARGV[4]   default ttr, ms          ARGV[5] default max attempts
  ARGV[6]   default backoff, JSON or ""
  ARGV[7..] ${ADD_FIELDS} values per job: id, topic, due (ms; "+<ms>": that long after now),
            ttr (ms or ""), max attempts (or ""),
            backoff (JSON or ""), deadline (ms or ""), replace ("1" or ""), body (JSON text)
  Unset ttr, max attempts and backoff come from the topic's config, then from the defaults.
  A job due so far ahead that its slot is far (lib/slots.ts: isFar) goes to that slot's list.
  A push topic's jobs written become claimable (lib/transitions.ts: claimable).
  Returns {pushed, then two values per job, a code and a record}, \`pushed\` being three values
  per push topic written: topic, via, earliest due (ms). The codes:
    CODE.ok        created               CODE.replaced  replaced (replace set, not reserved)
    CODE.duplicate    the id exists in this topic: the stored record, unchanged
    CODE.idTaken      the id exists in another topic: that record
    CODE.jobReserved  replace refused, the job is reserved: its record
  Cost: per job one SET NX (a GET more when the id exists, and a ZSCORE when that job waits:
  reserved by a pop?); per topic one MGET (its keys:
  config, timing, waiting, seq), one ZADD per index written, SET (timing) + ZADD LT when a
  delayed job is due before the topic's next; per far slot written RPUSH, ZADD, INCRBY (and the
  same next check); when a job was written and a caller may be long-polling the topic
  (lib/topic.ts: listen), one INCR of its seq; for a topic written to for the first time, HGETALL
  (an earlier version's hash: lib/topic.ts, adopt), ZADD NX to the topic list and the INCR; for a
  push topic two ZADD LT more (claims, schedule).
]]
local DEF_TTR, DEF_MAX = tonumber(ARGV[4]), tonumber(ARGV[5])
local DEF_BACKOFF = nil
if ARGV[6] ~= "" then DEF_BACKOFF = ARGV[6] end
-- Index writes wait until the end, one ZADD per index; \`due[topic][id]\` keeps the last write
-- for an id, so an id added and then replaced within one batch is indexed once.
local out, configs, order, ids, due, pushed, fresh, listening = {}, {}, {}, {}, {}, {}, {}, {}

for i = 7, #ARGV, ${ADD_FIELDS} do
  local id, topic, dueAt = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  if string.sub(ARGV[i + 2], 1, 1) == "+" then dueAt = NOW + tonumber(string.sub(ARGV[i + 2], 2)) end
  local cfg = configs[topic]
  if not cfg then
    local t = fields(topic)
    cfg = config(topic)
    -- A topic with neither config nor counter has never been written to: it joins the topic
    -- list now.
    fresh[topic] = not t.config and not t.seq
    listening[topic] = listened(topic)
    configs[topic], ids[topic], due[topic] = cfg, {}, {}
    order[#order + 1] = topic
  end
  local meta = {
    id = id, topic = topic, state = "waiting", due = dueAt, attempts = 0, createdAt = NOW,
    deadline = tonumber(ARGV[i + 6]),
    ttr = tonumber(ARGV[i + 3]) or (cfg.ttr and cfg.ttr * 1000) or DEF_TTR,
    maxAttempts = tonumber(ARGV[i + 4]) or cfg.maxAttempts or DEF_MAX,
  }
  if ARGV[i + 5] ~= "" then
    meta.backoff = ARGV[i + 5]
  elseif cfg.backoff ~= nil then
    meta.backoff = cjson.encode(cfg.backoff)
  else
    meta.backoff = DEF_BACKOFF
  end
  local body = ARGV[i + 8]
  local raw = encode(meta) .. "\\n" .. body
  local code = CODE.ok
  if not rcall("SET", key.job(id), raw, "NX") then
    local stored = rcall("GET", key.job(id))
    local old, oldBody = decode(stored)
    -- A job a pop reserved still reads as waiting: its lease tells (lib/transitions.ts).
    if old.topic == topic and reservedByPop(id, old) then
      stored = encode(old) .. "\\n" .. oldBody
    end
    if old.topic ~= topic then
      code, raw = CODE.idTaken, stored
    elseif ARGV[i + 7] ~= "1" then
      code, raw = CODE.duplicate, stored
    elseif old.state == "reserved" then
      code, raw = CODE.jobReserved, stored
    else
      -- Written earlier in this batch, it is not indexed yet: nothing to take out. A job
      -- replaced into the slot list it already sits in is listed again: whether its old entry
      -- is still there depends on clocks (a caller ahead may have opened the slot), and the
      -- slot's opening skips the duplicate (lib/slots.ts: migrate).
      if due[topic][id] == nil then unindex(id, old) end
      code, raw = CODE.replaced, save(id, meta, body)
    end
  end
  if code == CODE.ok or code == CODE.replaced then
    if due[topic][id] == nil then ids[topic][#ids[topic] + 1] = id end
    due[topic][id] = dueAt
  end
  out[#out + 1] = code
  out[#out + 1] = raw
end

for _, topic in ipairs(order) do
  local ready, delayed, earliest, far, slots = {}, {}, nil, {}, {}
  for _, id in ipairs(ids[topic]) do
    local at = due[topic][id]
    if isFar(at) then
      local slot = slotOf(at)
      if not far[slot] then
        far[slot] = {}
        slots[#slots + 1] = slot
      end
      far[slot][#far[slot] + 1] = id
    else
      local index = delayed
      if at <= NOW then index = ready end
      index[#index + 1] = at
      index[#index + 1] = id
      if at > NOW and (earliest == nil or at < earliest) then earliest = at end
    end
  end
  if #ready > 0 then rcall("ZADD", key.ready(topic), unpack(ready)) end
  if #delayed > 0 then
    rcall("ZADD", key.delayed(topic), unpack(delayed))
    lowerNext(topic, earliest)
  end
  for _, slot in ipairs(slots) do toSlot(topic, slot, far[slot]) end
  if #ids[topic] > 0 then
    -- The counter wakes long-polling callers; a fresh topic gets one so it is not fresh again.
    if fresh[topic] then rcall("ZADD", key.topics, "NX", 0, topic) end
    if fresh[topic] or listening[topic] then bump(topic) end
    local push = configs[topic].push
    if type(push) == "table" then
      local first = nil
      for _, id in ipairs(ids[topic]) do
        if first == nil or due[topic][id] < first then first = due[topic][id] end
      end
      claimable(topic, first)
      pushed[#pushed + 1] = topic
      pushed[#pushed + 1] = push.via or "direct"
      pushed[#pushed + 1] = first
    end
  end
end
table.insert(out, 1, pushed)
return out
`,
  parse(reply) {
    const [pushedFlat, ...flat] = asArray(reply, "add");
    const out: AddReply = { jobs: [], pushed: [] };
    for (let i = 0; i < flat.length; i += 2) {
      out.jobs.push({ code: codeName(flat[i]), record: record(flat[i + 1], "add") });
    }
    const pushed = asArray(pushedFlat, "add");
    for (let i = 0; i < pushed.length; i += 3) {
      out.pushed.push({
        topic: String(pushed[i]),
        via: pushed[i + 1] === "qstash" ? "qstash" : "direct",
        dueAt: Number(pushed[i + 2]),
      });
    }
    return out;
  },
});
