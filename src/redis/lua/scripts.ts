// One Lua script per state transition. Each header gives its arguments, returns and cost.
// Common arguments (KEYS[1], ARGV[1..3]) and the helpers used below are in lib.ts.

/**
 * Error codes scripts return; `src/redis/scripts.ts` turns them into typed errors.
 */
export const CODE = {
  ok: 1,
  replaced: 2,
  existing: 0,
  notFound: -1,
  exists: -2,
  notReserved: -3,
  staleReceipt: -4,
  reserved: -5,
  forbidden: -6,
} as const;

/** Fields per job in the add script's ARGV. */
export const ADD_FIELDS = 9;

export const ADD = `
--[[ add: adds jobs (one or a batch), idempotently by id.
  ARGV[4]   default ttr, ms          ARGV[5] default max attempts
  ARGV[6]   default backoff, JSON or ""
  ARGV[7..] ${ADD_FIELDS} values per job: id, topic, due (ms), ttr (ms or ""), max attempts (or ""),
            backoff (JSON or ""), deadline (ms or ""), replace ("1" or ""), body (JSON text)
  Unset ttr, max attempts and backoff come from the topic's config, then from the defaults.
  A job due so far ahead that its slot is far (lib.ts: isFar) goes to that slot's list.
  Returns two values per job, a code and a record:
     1 created           2 replaced (replace was set and the job was not reserved)
     0 the id exists in this topic: the stored record, unchanged
    -2 the id exists in another topic: that record   -5 replace refused, the job is reserved
  Cost: per job one SET NX (a GET more when the id exists); per topic one GET (config), one
  ZADD per index written, one ZADD LT to the schedule; per far slot written RPUSH, ZADD,
  INCRBY, ZADD LT; when a job was written, one ZADD NX to the topic list and one INCR of the
  topic's seq.
]]
local DEF_TTR, DEF_MAX = tonumber(ARGV[4]), tonumber(ARGV[5])
local DEF_BACKOFF = nil
if ARGV[6] ~= "" then DEF_BACKOFF = ARGV[6] end
-- Index writes wait until the end, one ZADD per index; \`due[topic][id]\` keeps the last write
-- for an id, so an id added and then replaced within one batch is indexed once.
local out, configs, order, ids, due = {}, {}, {}, {}, {}
-- kept[id]: a replaced job whose id already sits in the slot list its new due time falls in;
-- it is counted again but not listed twice.
local kept = {}

for i = 7, #ARGV, ${ADD_FIELDS} do
  local id, topic, dueAt = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local cfg = configs[topic]
  if not cfg then
    cfg = config(topic)
    configs[topic], ids[topic], due[topic] = cfg, {}, {}
    order[#order + 1] = topic
  end
  local meta = {
    i = id, t = topic, s = "waiting", d = dueAt, a = 0, c = NOW, x = tonumber(ARGV[i + 6]),
    r = tonumber(ARGV[i + 3]) or (cfg.ttr and cfg.ttr * 1000) or DEF_TTR,
    m = tonumber(ARGV[i + 4]) or cfg.maxAttempts or DEF_MAX,
  }
  if ARGV[i + 5] ~= "" then
    meta.b = ARGV[i + 5]
  elseif cfg.backoff ~= nil then
    meta.b = cjson.encode(cfg.backoff)
  else
    meta.b = DEF_BACKOFF
  end
  local body = ARGV[i + 8]
  local raw = encode(meta) .. "\\n" .. body
  local code = 1
  if not rcall("SET", key.job(id), raw, "NX") then
    local stored = rcall("GET", key.job(id))
    local old = decode(stored)
    if old.t ~= topic then
      code, raw = -2, stored
    elseif ARGV[i + 7] ~= "1" then
      code, raw = 0, stored
    elseif old.s == "reserved" then
      code, raw = -5, stored
    else
      -- Written earlier in this batch, it is not indexed yet: nothing to take out.
      -- Whether its id sits in a slot list: it waits there, or was deleted there.
      local listed = kept[id]
      if due[topic][id] == nil then listed = unindex(id, old) or old.l == "1" end
      kept[id] = listed and isFar(dueAt) and slotOf(old.d) == slotOf(dueAt) or nil
      code, raw = 2, save(id, meta, body)
    end
  end
  if code > 0 then
    if due[topic][id] == nil then ids[topic][#ids[topic] + 1] = id end
    due[topic][id] = dueAt
  end
  out[#out + 1] = code
  out[#out + 1] = raw
end

for _, topic in ipairs(order) do
  local ready, delayed, earliest, far, slots = {}, {}, nil, {}, {}
  local recounted = 0
  for _, id in ipairs(ids[topic]) do
    local at = due[topic][id]
    if kept[id] then
      recounted = recounted + 1
    elseif isFar(at) then
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
    rcall("ZADD", key.schedule, "LT", earliest, topic)
  end
  for _, slot in ipairs(slots) do toSlot(topic, slot, far[slot]) end
  if recounted > 0 then rcall("INCRBY", key.slotted(topic), recounted) end
  if #ids[topic] > 0 then
    rcall("ZADD", key.topics, "NX", 0, topic)
    bump(topic)
  end
end
return out
`;

export const POP = `
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
  the counter; otherwise both are -1. A paused topic reserves nothing.
  Cost: GET (config), ZRANGE (reserved), ZRANGE (slots), ZRANGE (delayed; ZREM + ZADD when
  some are due), ZRANGE + ZREM (ready), per job GET + SET, then one ZADD (reserved) and one
  ZADD LT (schedule). When nothing was reserved: three ZRANGEs and a GET instead, for the hint.
]]
local topic, count, nonce = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local function hint()
  return {nextEvent(topic), tonumber(rcall("GET", key.seq(topic)) or "0")}
end
if config(topic).paused then return hint() end
expire(topic, 100)
migrate(topic, 1000)
promote(topic, 1000)
-- Only what is due by this call's own clock: a call that spent long in transit may carry an
-- older "now" than the one that promoted a job, and must not hand it out before that time.
local popped = rcall("ZRANGE", key.ready(topic), "-inf", NOW, "BYSCORE", "LIMIT", 0, count)
if #popped > 0 then rcall("ZREM", key.ready(topic), unpack(popped)) end
local out, leases, first = {-1, -1}, {}, nil
for _, id in ipairs(popped) do
  local meta, body = load(id)
  if meta and meta.s == "waiting" and meta.d > NOW then
    -- Not due by this call's clock (never expected: ready ids are due): put it back in place.
    enqueue(id, topic, meta.d)
  elseif meta and meta.s == "waiting" then
    if meta.x and NOW > meta.x then
      kill(id, meta, body, "deadline")
    else
      meta.s, meta.a, meta.u = "reserved", meta.a + 1, NOW + meta.r
      meta.k = nonce .. "." .. (#out - 2)
      out[#out + 1] = save(id, meta, body)
      leases[#leases + 1] = meta.u
      leases[#leases + 1] = id
      if first == nil or meta.u < first then first = meta.u end
    end
  end
end
if first == nil then return hint() end
rcall("ZADD", key.reserved(topic), unpack(leases))
rcall("ZADD", key.schedule, "LT", first, topic)
return out
`;

export const FINISH = `
--[[ finish: a reserved job is done. Its record is kept RETENTION ms for status queries and
  duplicate adds. Finishing it again with its receipt (or none) answers the same, so a client may
  retry a finish whose answer it lost.
  ARGV[4] id   ARGV[5] receipt, or "" for whoever holds it   ARGV[6] scope (lib.ts: allowed)
  Returns {1, "finished"}, or {error code, current state}.
  Cost: GET, ZREM, SET.
]]
local id, receipt = ARGV[4], ARGV[5]
local meta, body, code = held(id, receipt, ARGV[6])
if code == -3 and meta.s == "finished" then
  return {1, "finished"}
end
if code ~= 0 then return {code, meta and stateOf(meta) or ""} end
rcall("ZREM", key.reserved(meta.t), id)
meta.s, meta.e, meta.u = "finished", NOW, nil
save(id, meta, body)
return {1, "finished"}
`;

export const TOUCH = `
--[[ touch: extends a reservation: its lease now ends ttr from now.
  ARGV[4] id   ARGV[5] receipt or ""   ARGV[6] scope (lib.ts: allowed)
  Returns {1, record}, or {error code, current state}.
  Cost: GET, ZADD, SET. (The schedule keeps its earlier time: a lower bound stays valid.)
]]
local id, receipt = ARGV[4], ARGV[5]
local meta, body, code = held(id, receipt, ARGV[6])
if code ~= 0 then return {code, meta and stateOf(meta) or ""} end
meta.u = NOW + meta.r
rcall("ZADD", key.reserved(meta.t), meta.u, id)
return {1, save(id, meta, body)}
`;

export const RELEASE = `
--[[ release: gives a reserved job back. It waits \`delay\` (default: its backoff step), or dies
  when its attempts are used up or the wait would end after its deadline.
  ARGV[4] id   ARGV[5] receipt or ""   ARGV[6] scope   ARGV[7] delay, ms, or "" for the backoff step
  Returns {1, record}, or {error code, current state}.
  Cost: GET, ZREM, SET, ZADD (+ ZADD LT to the schedule when delayed), INCR (seq).
]]
local id, receipt = ARGV[4], ARGV[5]
local meta, body, code = held(id, receipt, ARGV[6])
if code ~= 0 then return {code, meta and stateOf(meta) or ""} end
rcall("ZREM", key.reserved(meta.t), id)
local raw = retry(id, meta, body, tonumber(ARGV[7]))
if meta.s == "waiting" then bump(meta.t) end
return {1, raw}
`;

export const BURY = `
--[[ bury: moves a reserved job to its topic's dead letter.
  ARGV[4] id   ARGV[5] receipt or ""   ARGV[6] scope (lib.ts: allowed)
  Returns {1, record}, or {error code, current state}.
  Cost: GET, ZREM, ZADD, SET.
]]
local id, receipt = ARGV[4], ARGV[5]
local meta, body, code = held(id, receipt, ARGV[6])
if code ~= 0 then return {code, meta and stateOf(meta) or ""} end
rcall("ZREM", key.reserved(meta.t), id)
return {1, kill(id, meta, body, "buried")}
`;

export const DELETE = `
--[[ delete: removes a job in any state; it is never handed out afterwards. The record is kept
  RETENTION ms as "deleted", so status queries and duplicate adds still see it. Deleting a
  deleted job answers the same.
  ARGV[4] id   ARGV[5] scope (lib.ts: allowed)
  Returns {1, "deleted"}, or {-1, ""} (no such job), {-6, ""} (outside the scope).
  Cost: GET, ZREM (one per index the job is in), SET.
]]
local id = ARGV[4]
local meta, body = load(id)
if not meta then return {-1, ""} end
if not allowed(meta.t, ARGV[5]) then return {-6, ""} end
if meta.s ~= "deleted" then
  if unindex(id, meta) then meta.l = "1" end
  meta.s, meta.e, meta.u = "deleted", NOW, nil
  save(id, meta, body)
end
return {1, "deleted"}
`;

/** Picks dead jobs of a topic: by count (oldest first) or by the ids given. */
const DEAD_SELECTION = `
local topic, count = ARGV[4], tonumber(ARGV[5])
local ids = {}
if count then
  ids = rcall("ZRANGE", key.dead(topic), 0, count - 1)
else
  for i = 6, #ARGV do ids[#ids + 1] = ARGV[i] end
end
local done = 0
`;

export const KICK = `
--[[ kick: dead jobs of a topic back to its ready list, attempts reset to 0.
  ARGV[4] topic   ARGV[5] count (oldest first), or "" when ids are given   ARGV[6..] ids (≤ 1000)
  Ids that are not dead jobs of this topic are skipped. Returns how many were kicked.
  Cost: ZRANGE (by count), per job GET, ZREM, ZADD, SET; one INCR (seq).
]]
${DEAD_SELECTION}
for _, id in ipairs(ids) do
  local meta, body = load(id)
  if meta and meta.t == topic and meta.s == "dead" then
    rcall("ZREM", key.dead(topic), id)
    meta.s, meta.a, meta.d, meta.e, meta.w = "waiting", 0, NOW, nil, nil
    rcall("ZADD", key.ready(topic), NOW, id)
    save(id, meta, body)
    done = done + 1
  end
end
if done > 0 then bump(topic) end
return done
`;

export const DELETE_DEAD = `
--[[ deleteDead: deletes dead jobs of a topic (the dead letter's purge).
  ARGV[4] topic   ARGV[5] count (oldest first), or "" when ids are given   ARGV[6..] ids (≤ 1000)
  Ids that are not dead jobs of this topic are skipped. Returns how many were deleted.
  Cost: ZRANGE (by count), per job GET, ZREM, SET.
]]
${DEAD_SELECTION}
for _, id in ipairs(ids) do
  local meta, body = load(id)
  if meta and meta.t == topic and meta.s == "dead" then
    rcall("ZREM", key.dead(topic), id)
    meta.s, meta.e = "deleted", NOW
    save(id, meta, body)
    done = done + 1
  end
end
return done
`;

export const LIST = `
--[[ list: one page of a topic's jobs in one state, in index order (due time for delayed and
  ready, lease end for reserved, time of death for dead). Delayed jobs in slot lists come after
  the delayed zset's, slot by slot, each slot in the order its jobs came. Moves open slots and
  promotes due jobs first (up to 1000 each) so that delayed and ready split at now.
  ARGV[4] topic   ARGV[5] delayed | ready | reserved | dead
  ARGV[6] cursor: an offset into the state's zset, or "<slot start>:<offset>" in the slot lists
  ARGV[7] limit
  Returns {the next page's cursor, or -1 on the last page; then the records}. A page of slotted
  jobs may hold fewer than \`limit\` (entries of deleted or moved jobs are skipped).
  Cost: migrate, promote, ZRANGE (one id more than the page, to know whether another page
  follows), per job GET; for slotted jobs a ZRANGE of slots and an LRANGE per slot read.
]]
local topic, state, cursor, limit = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
migrate(topic, 1000)
promote(topic, 1000)
local out = {-1}
local room, from, at = limit, "-inf", 0
local slot, offset = string.match(cursor, "^(%d+):(%d+)$")
if slot then
  from, at = slot, tonumber(offset)
else
  offset = tonumber(cursor)
  local ids = rcall("ZRANGE", key[state](topic), offset, offset + limit)
  for i = 1, math.min(#ids, limit) do
    local raw = rcall("GET", key.job(ids[i]))
    if raw then out[#out + 1] = raw end
  end
  if #ids > limit then
    out[1] = offset + limit
    return out
  end
  if state ~= "delayed" then return out end
  room = limit - #ids
end
-- The slot lists, from slot \`from\` at offset \`at\`. A slot list holds an id twice only when
-- a job was deleted while slotted and added again (replace) into the same slot: such an id is
-- listed once per page.
local seen = {}
local slots = rcall("ZRANGE", key.slots(topic), from, "+inf", "BYSCORE", "LIMIT", 0, room + 1)
for n, name in ipairs(slots) do
  if room == 0 then
    out[1] = name .. ":0"
    break
  end
  local ids = rcall("LRANGE", slotList(topic, name), at, at + room)
  for i = 1, math.min(#ids, room) do
    local raw = not seen[ids[i]] and rcall("GET", key.job(ids[i]))
    if raw then
      local meta = decode(raw)
      if meta.s == "waiting" and meta.t == topic and slotOf(meta.d) == tonumber(name) then
        out[#out + 1] = raw
        seen[ids[i]] = true
      end
    end
  end
  if #ids > room then
    out[1] = name .. ":" .. (at + room)
    break
  end
  room, at = room - #ids, 0
end
return out
`;

const TOPIC_STATS_FN = `
-- Counts per state in O(log n), the earliest due time (-1: none) and the config JSON ("": none).
-- Jobs in slot lists count as delayed.
local function stats(topic)
  -- Ids of open slots are moved first (up to 1000; a tick or pop moves them too), so that the
  -- jobs counted as slotted are all due later than now.
  migrate(topic, 1000)
  local due = rcall("ZCOUNT", key.delayed(topic), "-inf", NOW)
  local slotted = tonumber(rcall("GET", key.slotted(topic)) or "0")
  local delayed = rcall("ZCARD", key.delayed(topic)) - due + slotted
  local ready = rcall("ZCARD", key.ready(topic)) + due
  local oldest = -1
  for _, index in ipairs({key.ready(topic), key.delayed(topic)}) do
    local first = rcall("ZRANGE", index, 0, 0, "WITHSCORES")
    if first[2] and (oldest < 0 or tonumber(first[2]) < oldest) then oldest = tonumber(first[2]) end
  end
  if oldest < 0 and slotted > 0 then
    -- Only slotted jobs: the start of the first slot, a lower bound of their due times.
    local first = rcall("ZRANGE", key.slots(topic), 0, 0, "WITHSCORES")
    if first[2] then oldest = tonumber(first[2]) end
  end
  return {topic, delayed, ready, rcall("ZCARD", key.reserved(topic)),
    rcall("ZCARD", key.dead(topic)), oldest, rcall("GET", key.config(topic)) or ""}
end
local out = {}
local function report(topic)
  for _, value in ipairs(stats(topic)) do out[#out + 1] = value end
end
`;

export const TOPIC_STATS = `
--[[ topicStats: counts and config of the topics named.
  ARGV[4..] topics
  Returns 7 values per topic: name, delayed, ready, reserved, dead, earliest due (or -1),
  config JSON (or "").
  Cost: 11 commands per topic (12 when only slotted jobs wait; more when a slot just opened),
  none of them a scan.
]]
${TOPIC_STATS_FN}
for i = 4, #ARGV do report(ARGV[i]) end
return out
`;

export const LIST_TOPICS = `
--[[ listTopics: a page of topics by name, with their stats.
  ARGV[4] the last name of the previous page, or ""   ARGV[5] page size
  Returns 1 if another page follows, else 0; then what topicStats returns for each topic.
  Cost: ZRANGE BYLEX (one name more than the page), then topicStats's per topic.
]]
${TOPIC_STATS_FN}
local from, size = "-", tonumber(ARGV[5])
if ARGV[4] ~= "" then from = "(" .. ARGV[4] end
local names = rcall("ZRANGE", key.topics, from, "+", "BYLEX", "LIMIT", 0, size + 1)
out[1] = 0
if #names > size then out[1] = 1 end
for i = 1, math.min(#names, size) do report(names[i]) end
return out
`;

export const CONFIGURE = `
--[[ configure: sets a topic's config (defaults for new jobs, paused).
  ARGV[4] topic   ARGV[5] config JSON
  Returns 1. Cost: SET, ZADD NX, INCR (seq: an unpaused topic wakes its long-polls).
]]
rcall("SET", key.config(ARGV[4]), ARGV[5])
rcall("ZADD", key.topics, "NX", 0, ARGV[4])
bump(ARGV[4])
return 1
`;

export const TICK = `
--[[ tick: the scheduler's work for one slice: for each topic whose next event is due, move the
  ids of its open slots, promote its due jobs and take back its expired reservations, then set
  when to look at it next.
  ARGV[4] most jobs to move in this call (≤ 1000)   ARGV[5] most topics to visit
  Returns {promoted, expired, died, topics visited, 1 if more is due now else 0}.
  Cost when idle: this EVALSHA and one ZRANGE, whatever the number of topics. Per topic
  visited: migrate, promote and expire, three ZRANGEs for the next event and a ZADD or ZREM.
]]
local budget, maxTopics = tonumber(ARGV[4]), tonumber(ARGV[5])
local topics = rcall("ZRANGE", key.schedule, "-inf", NOW, "BYSCORE", "LIMIT", 0, maxTopics)
if #topics == 0 then return {0, 0, 0, 0, 0} end
local promoted, expired, died, more = 0, 0, 0, 0
if #topics == maxTopics then more = 1 end
for _, topic in ipairs(topics) do
  if budget <= 0 then
    more = 1
    break
  end
  budget = budget - migrate(topic, budget)
  if budget > 0 then
    local moved = promote(topic, budget)
    promoted, budget = promoted + moved, budget - moved
  end
  if budget > 0 then
    local back, dead = expire(topic, budget)
    expired, died, budget = expired + back, died + dead, budget - back
  end
  local nextAt = nextEvent(topic)
  if nextAt >= 0 then
    rcall("ZADD", key.schedule, nextAt, topic)
    if nextAt <= NOW then more = 1 end
  else
    rcall("ZREM", key.schedule, topic)
  end
end
return {promoted, expired, died, #topics, more}
`;
