// Recurring schedules: put, read, delete and list them, and make their fires (a job each).
// The fire times come from the caller (src/schedules/cron.ts reads the cron); the scripts make
// the jobs, once each: a fire's id is `{name}@{fire ms}`, and adding an id that exists does
// nothing (lib/jobs.ts: addJob).
import { type CodeName, codeName } from "../../codes";
import { SCHEDULE_MARKERS } from "../../keys";
import { asArray, defineScript } from "../script";

/** A schedule's record as stored: `<state JSON>\n<spec JSON>\n<body JSON>`. */
export type ScheduleRecord = string;

/** A push topic a fire was made in: how it delivers and its earliest fire. */
export type SchedulePushed = { topic: string; via: "direct" | "qstash"; dueAt: number };

/**
 * Lua shared by the schedule scripts: reading a record, making fires, taking back fires made
 * ahead, and re-arming the schedule's marker. Needs the job helpers (addJob, dropJob).
 */
const LUA_SCHEDULES = `
local function readSchedule(raw)
  local a = string.find(raw, "\\n", 1, true)
  local b = string.find(raw, "\\n", a + 1, true)
  return cjson.decode(string.sub(raw, 1, a - 1)), string.sub(raw, a + 1, b - 1), string.sub(raw, b + 1)
end

local function writeSchedule(name, state, spec, body)
  -- cjson writes an empty table as {}: the made list is always written as a list.
  local made = state.made
  state.made = nil
  local text = cjson.encode(state)
  local list = "[]"
  if #made > 0 then list = "[" .. table.concat(made, ",") .. "]" end
  text = string.sub(text, 1, -2)
  if text ~= "{" then text = text .. "," end
  text = text .. '"made":' .. list .. "}"
  state.made = made
  local raw = text .. "\\n" .. spec .. "\\n" .. body
  rcall("SET", key.scheduleRecord(name), raw)
  return raw
end

-- Takes back the fires made ahead that are not due yet and still wait (a push claim holds the
-- ones due within its lookahead: those are delivered). Returns the last made fire already due.
local function takeBack(name, topic, state)
  local last = state.last
  for _, at in ipairs(state.made or {}) do
    if at <= NOW then
      if last == nil or at > last then last = at end
    else
      dropJob(name .. "@" .. string.format("%d", at), topic, at)
    end
  end
  return last
end

-- Makes the fires (an existing id is left alone), the due ones into \`last\`, the others into the
-- made list. Returns how many jobs were added.
local function makeFires(name, spec, body, state, fires, defaults)
  local added = 0
  for _, at in ipairs(fires) do
    local id = name .. "@" .. string.format("%d", at)
    local ttr = nil
    if spec.ttr then ttr = spec.ttr * 1000 end
    if addJob(id, spec.topic, at, body, ttr, spec.maxAttempts, nil, defaults) then
      added = added + 1
    end
    if at <= NOW then
      if state.last == nil or at > state.last then state.last = at end
    else
      state.made[#state.made + 1] = at
    end
  end
  return added
end

local function rearmSchedules()
  local head = rcall("ZRANGE", key.schedulesDue, 0, 0, "WITHSCORES")
  if head[2] then
    rcall("ZADD", key.schedule, tonumber(head[2]), "${SCHEDULE_MARKERS.schedules}")
  else
    rcall("ZREM", key.schedule, "${SCHEDULE_MARKERS.schedules}")
  end
end

local function pushedOf(topic, fires, out)
  if #fires == 0 or not isPush(topic) then return end
  local push = config(topic).push
  out[#out + 1] = topic
  out[#out + 1] = (type(push) == "table" and push.via) or "direct"
  out[#out + 1] = fires[1]
end
`;

export type ScheduleSaveReply =
  | { code: "forbidden" }
  | { code: CodeName; record: ScheduleRecord; added: number; pushed: SchedulePushed[] };

function pushedOf(reply: unknown): SchedulePushed[] {
  const flat = Array.isArray(reply) ? reply : [];
  const out: SchedulePushed[] = [];
  for (let i = 0; i + 2 < flat.length; i += 3) {
    out.push({
      topic: String(flat[i]),
      via: flat[i + 1] === "qstash" ? "qstash" : "direct",
      dueAt: Number(flat[i + 2]),
    });
  }
  return out;
}

export const scheduleSave = defineScript<ScheduleSaveReply>({
  name: "scheduleSave",
  lua: `${LUA_SCHEDULES}
--[[ scheduleSave: puts a schedule (PUT /v1/schedules/{name}).
  ARGV[4] name   ARGV[5] spec JSON   ARGV[6] body JSON   ARGV[7] scope (lib/access.ts)
  ARGV[8] default ttr, ms   ARGV[9] default max attempts
  ARGV[10] the fires to make now (JSON list of ms: those within MAKE_AHEAD_MS), ARGV[11] the
  next fire after them (ms, or "" for none), ARGV[12] when that one is to be made (ms)
  A schedule put again as it is (same spec and body) is left as it is: nothing made again.
  Otherwise its fires made ahead and still waiting are taken back, and it starts anew from the
  fires given (none when paused); when it last fired stays.
  Returns {code, record, jobs added, pushed (topic, via, earliest fire per push topic)}, code
  CODE.ok (created), CODE.replaced, CODE.duplicate (unchanged), or {CODE.forbidden} when the
  existing schedule's topic is outside the scope.
  Cost: GET, SET, ZADD (names); not paused: per fire addJob's, ZADD (due) and ZADD LT (the
  schedule's marker); paused: ZREM (due); replacing: per fire made ahead and not yet due, GET and
  (when it still waits) ZREM, DEL.
]]
local name, specText, body, scope = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local spec = cjson.decode(specText)
local defaults = {ttr = tonumber(ARGV[8]), maxAttempts = tonumber(ARGV[9])}
local raw = rcall("GET", key.scheduleRecord(name))
local state = {createdAt = NOW, made = {}}
local code = CODE.ok
if raw then
  local old, oldSpec, oldBody = readSchedule(raw)
  local oldTopic = cjson.decode(oldSpec).topic
  if not allowed(oldTopic, scope) then return {CODE.forbidden} end
  if oldSpec == specText and oldBody == body then return {CODE.duplicate, raw, 0, {}} end
  state.createdAt, state.last = old.createdAt, takeBack(name, oldTopic, old)
  code = CODE.replaced
end
local fires = cjson.decode(ARGV[10])
local added, pushed = 0, {}
if spec.paused then
  rcall("ZREM", key.schedulesDue, name)
else
  added = makeFires(name, spec, body, state, fires, defaults)
  pushedOf(spec.topic, fires, pushed)
  state.next = tonumber(ARGV[11])
  if state.next then
    local makeAt = tonumber(ARGV[12])
    rcall("ZADD", key.schedulesDue, makeAt, name)
    rcall("ZADD", key.schedule, "LT", makeAt, "${SCHEDULE_MARKERS.schedules}")
  else
    rcall("ZREM", key.schedulesDue, name)
  end
end
rcall("ZADD", key.scheduleNames, 0, name)
return {code, writeSchedule(name, state, specText, body), added, pushed}
`,
  parse(reply) {
    const [code, record, added, pushed] = asArray(reply, "scheduleSave");
    const name = codeName(code);
    if (name === "forbidden") return { code: name };
    return {
      code: name,
      record: String(record),
      added: Number(added),
      pushed: pushedOf(pushed),
    };
  },
});

export const scheduleGet = defineScript<ScheduleRecord | undefined>({
  name: "scheduleGet",
  lua: `
--[[ scheduleGet: a schedule's record, or false. ARGV[4] name.  Cost: GET.
]]
return rcall("GET", key.scheduleRecord(ARGV[4]))
`,
  parse(reply) {
    return typeof reply === "string" ? reply : undefined;
  },
});

export const scheduleDelete = defineScript<CodeName>({
  name: "scheduleDelete",
  lua: `${LUA_SCHEDULES}
--[[ scheduleDelete: deletes a schedule; its fires made ahead and still waiting are taken back.
  ARGV[4] name   ARGV[5] scope
  Returns CODE.ok, or CODE.notFound (none, or its topic outside the scope).
  Cost: GET, DEL, ZREM (names), ZREM (due); per fire made ahead and not yet due, GET and (when it
  still waits) ZREM, DEL.
]]
local name = ARGV[4]
local raw = rcall("GET", key.scheduleRecord(name))
if not raw then return CODE.notFound end
local state, specText = readSchedule(raw)
local topic = cjson.decode(specText).topic
if not allowed(topic, ARGV[5]) then return CODE.notFound end
takeBack(name, topic, state)
rcall("DEL", key.scheduleRecord(name))
rcall("ZREM", key.scheduleNames, name)
rcall("ZREM", key.schedulesDue, name)
return CODE.ok
`,
  parse(reply) {
    return codeName(reply);
  },
});

export type ScheduleListReply = {
  records: { name: string; raw: ScheduleRecord }[];
  after?: string;
};

export const scheduleList = defineScript<ScheduleListReply>({
  name: "scheduleList",
  lua: `
--[[ scheduleList: a page of schedules by name.
  ARGV[4] after this name ("" from the start)   ARGV[5] most names to read   ARGV[6] scope
  Returns {the last name read when the page was full else "", then name and record of each one
  in scope}.
  Cost: ZRANGE BYLEX, MGET.
]]
local start = "-"
if ARGV[4] ~= "" then start = "(" .. ARGV[4] end
local limit = tonumber(ARGV[5])
local names = rcall("ZRANGE", key.scheduleNames, start, "+", "BYLEX", "LIMIT", 0, limit)
local out = {""}
if #names == 0 then return out end
if #names == limit then out[1] = names[#names] end
local keys = {}
for i, name in ipairs(names) do keys[i] = key.scheduleRecord(name) end
local raws = rcall("MGET", unpack(keys))
for i, raw in ipairs(raws) do
  if raw then
    local a = string.find(raw, "\\n", 1, true)
    local b = string.find(raw, "\\n", a + 1, true)
    if allowed(cjson.decode(string.sub(raw, a + 1, b - 1)).topic, ARGV[6]) then
      out[#out + 1] = names[i]
      out[#out + 1] = raw
    end
  end
end
return out
`,
  parse(reply) {
    const [after, ...flat] = asArray(reply, "scheduleList");
    const records: ScheduleListReply["records"] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      records.push({ name: String(flat[i]), raw: String(flat[i + 1]) });
    }
    return after ? { records, after: String(after) } : { records };
  },
});

export type DueSchedules = { names: string[]; records: ScheduleRecord[] };

export const schedulesDue = defineScript<DueSchedules>({
  name: "schedulesDue",
  lua: `${LUA_SCHEDULES}
--[[ schedulesDue: the schedules whose next fires are to be made by now (the scheduler's step).
  ARGV[4] most schedules
  Returns {names, records}. With none due, the schedule's marker moves to the next one's time.
  Cost: ZRANGE; MGET when some are due, else ZRANGE and ZADD (or ZREM) re-arming the marker.
]]
local names = rcall("ZRANGE", key.schedulesDue, "-inf", NOW, "BYSCORE", "LIMIT", 0, tonumber(ARGV[4]))
if #names == 0 then
  rearmSchedules()
  return {{}, {}}
end
local keys = {}
for i, name in ipairs(names) do keys[i] = key.scheduleRecord(name) end
local raws = rcall("MGET", unpack(keys))
for i = 1, #names do raws[i] = raws[i] or "" end
return {names, raws}
`,
  parse(reply) {
    const [names, records] = asArray(reply, "schedulesDue");
    return {
      names: asArray(names, "schedulesDue").map(String),
      records: asArray(records, "schedulesDue").map(String),
    };
  },
});

/** Values per schedule in scheduleFire's ARGV. */
export const FIRE_FIELDS = 5;

export type FireReply = {
  /** Jobs added, by schedule. */
  made: { name: string; added: number }[];
  pushed: SchedulePushed[];
};

export const scheduleFire = defineScript<FireReply>({
  name: "scheduleFire",
  lua: `${LUA_SCHEDULES}
--[[ scheduleFire: makes schedules' next fires, each job once, however many ticks call at once.
  ARGV[4] default ttr, ms   ARGV[5] default max attempts
  ARGV[6..] ${FIRE_FIELDS} values per schedule: name, the next fire it was read with (ms), the fires
  to make (JSON list of ms), the next fire after them (ms or ""), when to make that one (ms)
  A schedule deleted, paused or moved on since it was read (its next fire is another) is left:
  whoever moved it made those fires. After an outage the caller gives the latest fire past and
  the ones ahead: the fires missed before it are not made.
  Returns {{name, jobs added}..., pushed (topic, via, earliest fire per push topic)}.
  Cost: per schedule GET; when it moves on, per fire addJob's, SET, ZADD (or ZREM) due; then
  ZRANGE and ZADD (or ZREM) re-arming the schedule's marker.
]]
local defaults = {ttr = tonumber(ARGV[4]), maxAttempts = tonumber(ARGV[5])}
local made, pushed = {}, {}
for i = 6, #ARGV, ${FIRE_FIELDS} do
  local name = ARGV[i]
  local raw = rcall("GET", key.scheduleRecord(name))
  if raw then
    local state, specText, body = readSchedule(raw)
    local spec = cjson.decode(specText)
    if not spec.paused and state.next and string.format("%d", state.next) == ARGV[i + 1] then
      local kept = {}
      for _, at in ipairs(state.made or {}) do
        if at <= NOW then
          if state.last == nil or at > state.last then state.last = at end
        else
          kept[#kept + 1] = at
        end
      end
      state.made = kept
      local fires = cjson.decode(ARGV[i + 2])
      local added = makeFires(name, spec, body, state, fires, defaults)
      pushedOf(spec.topic, fires, pushed)
      state.next = tonumber(ARGV[i + 3])
      if state.next then
        rcall("ZADD", key.schedulesDue, tonumber(ARGV[i + 4]), name)
      else
        rcall("ZREM", key.schedulesDue, name)
      end
      writeSchedule(name, state, specText, body)
      made[#made + 1] = {name, added}
    end
  else
    rcall("ZREM", key.schedulesDue, name)
  end
end
rearmSchedules()
made[#made + 1] = pushed
return made
`,
  parse(reply) {
    const flat = asArray(reply, "scheduleFire");
    const pushed = pushedOf(flat[flat.length - 1]);
    const made = flat.slice(0, -1).map((entry) => {
      const [name, added] = asArray(entry, "scheduleFire");
      return { name: String(name), added: Number(added) };
    });
    return { made, pushed };
  },
});
