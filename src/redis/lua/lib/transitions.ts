// Lua: the moves a job makes between indexes, shared by the scripts (lib/index.ts orders them).
import { CLAIM_AHEAD_MS } from "../../../domain/push";
import { BACKOFF_SCHEDULES, MAX_DELAY_SECONDS } from "../../../domain/schemas";
import { SCHEDULE_MARKERS } from "../../keys";

const B36 = "0123456789abcdefghijklmnopqrstuvwxyz";
const B36_PAIRS = Array.from({ length: 36 * 36 }, (_, n) => n.toString(36).padStart(2, "0")).join(
  "",
);

const schedules = Object.entries(BACKOFF_SCHEDULES)
  // ["wechatpay-native"] = {...}: a name with a hyphen is no Lua identifier.
  .map(([name, steps]) => `[${JSON.stringify(name)}] = {${steps.join(", ")}}`)
  .join(", ");

/** Needs `rcall`, `key`, NOW, the record codec and the slot helpers in scope. */
export const LUA_TRANSITIONS = `
local SCHEDULES = {${schedules}}       -- seconds
local MAX_WAIT = ${MAX_DELAY_SECONDS} -- seconds
local CLAIM_AHEAD = ${CLAIM_AHEAD_MS}  -- ms: push jobs are claimed this long before they are due

-- Whether a topic is pushed (it has a push config), asked once per topic per call.
local pushed = {}
local function isPush(topic)
  if pushed[topic] == nil then pushed[topic] = rcall("ZSCORE", key.pushTopics, topic) ~= false end
  return pushed[topic]
end

-- A push topic has a waiting job that may be claimed from \`at\` on: the claims index and the
-- schedule's \`${SCHEDULE_MARKERS.push}\` sentinel (CLAIM_AHEAD earlier, so that the tick sees it in time) keep
-- lower bounds.
local function claimable(topic, at)
  rcall("ZADD", key.claims, "LT", at, topic)
  rcall("ZADD", key.schedule, "LT", at - CLAIM_AHEAD, "${SCHEDULE_MARKERS.push}")
end

local function ms(seconds) return math.floor(seconds * 1000 + 0.5) end

-- A pop leaves the record of a job it reserves as it was (waiting, due, its attempts so far):
-- the reservation is its entry in the topic's lease zset, whose score is the lease's end. The
-- receipt is derived from the record: the attempt's number, the due time it was reserved at and
-- when the job was added, which no other reservation of the job shares (a retry counts the
-- attempt and moves the due time, a kick moves it, a replace adds the job anew), then a hash of
-- its id, so that jobs added and reserved alike do not share receipts either. A push claim
-- writes its reservation into the record.
local B36 = "${B36}"
-- Every pair of base-36 digits, "00" to "zz": base36 writes two digits a step (1.1-1.4 µs a
-- due time against 1.6-2.4 one digit a step; a pop and a finish each write three numbers).
local B36_PAIRS = "${B36_PAIRS}"
local function base36(n)
  n = math.floor(n)
  if n < 0 then return "-" .. base36(-n) end
  if n < 36 then return string.sub(B36, n + 1, n + 1) end
  local out = ""
  while n >= 1296 do
    local pair = n % 1296
    out = string.sub(B36_PAIRS, 2 * pair + 1, 2 * pair + 2) .. out
    n = (n - pair) / 1296
  end
  -- The leading one or two digits, without a leading zero.
  if n >= 36 then return string.sub(B36_PAIRS, 2 * n + 1, 2 * n + 2) .. out end
  return string.sub(B36, n + 1, n + 1) .. out
end
local function popReceipt(meta)
  return "p" .. (meta.attempts + 1) .. "." .. base36(meta.due) .. "." .. base36(meta.createdAt)
    .. "." .. base36(idHash(meta.id))
end

-- Fills in the reservation a pop made of a waiting job (its lease ending at \`leaseEnd\`, nil when
-- not read), as the record would hold it had pop written it. Returns the meta.
local function asReserved(meta, leaseEnd)
  meta.receipt = popReceipt(meta)
  meta.state, meta.attempts, meta.leaseEnd = "reserved", meta.attempts + 1, leaseEnd
  meta.messageId = nil
  return meta
end

-- Whether a waiting job is reserved by a pop: its lease zset entry (ZSCORE). If so, fills the
-- reservation in (asReserved).
local function reservedByPop(id, meta)
  if meta.state ~= "waiting" then return false end
  local leaseEnd = rcall("ZSCORE", key.reserved(meta.topic), id)
  if not leaseEnd then return false end
  asReserved(meta, tonumber(leaseEnd))
  return true
end

-- How long to wait after the n-th reservation failed (n >= 1), in ms. \`spec\` is the record's
-- backoff JSON (or nil).
local function backoff(spec, n)
  if spec == nil then return 0 end
  spec = cjson.decode(spec)
  if type(spec) == "string" then spec = SCHEDULES[spec] end
  if type(spec) == "number" then return ms(spec) end
  if spec.type == "exponential" then
    local wait = spec.delay * (spec.factor ^ (n - 1))
    return ms(math.min(wait, spec.max or MAX_WAIT))
  end
  return ms(spec[n] or spec[#spec])
end

-- A waiting job goes to the ready list once due, to its slot list when far, else to the delay
-- bucket.
local function enqueue(id, topic, due)
  if due <= NOW then
    rcall("ZADD", key.ready(topic), due, id)
  elseif isFar(due) then
    toSlot(topic, slotOf(due), {id})
  else
    rcall("ZADD", key.delayed(topic), due, id)
    lowerNext(topic, due)
  end
  if isPush(topic) then claimable(topic, due) end
end

-- Takes a job out of the index of its state. A waiting job in neither zset is reserved by a pop
-- (its lease goes, and \`meta\` is filled in as reserved: asReserved) or has its id in a slot
-- list: that entry stays (removing it would scan the list) and is skipped when the slot opens,
-- and the count of slotted jobs drops now. Returns true for such a job.
local function unindex(id, meta)
  if meta.state == "waiting" then
    local removed = rcall("ZREM", key.delayed(meta.topic), id)
      + rcall("ZREM", key.ready(meta.topic), id)
    if removed == 0 and rcall("ZREM", key.reserved(meta.topic), id) == 1 then
      asReserved(meta, nil)
      return false
    end
    if removed == 0 then
      rcall("DECR", key.slotted(meta.topic))
      return true
    end
  elseif meta.state == "reserved" then
    rcall("ZREM", key.reserved(meta.topic), id)
  elseif meta.state == "dead" then
    rcall("ZREM", key.dead(meta.topic), id)
  end
end

-- Records why the job's current attempt failed: \`err\` is the message as the record keeps it
-- (src/redis/record.ts: errorField, by the caller), "" or nil for none (the last one stays).
local function failed(meta, err)
  if err and err ~= "" then meta.lastError = math.floor(NOW) .. ":" .. meta.attempts .. ":" .. err end
end

-- A push job's death is queued for its topic's failureUrl, in the topic's own list, the topic's
-- turn due now unless it came sooner (scripts/push.ts: notices).
local function kill(id, meta, body, reason)
  meta.state, meta.endedAt, meta.deadReason = "dead", NOW, reason
  meta.leaseEnd, meta.receipt, meta.messageId = nil, nil, nil
  rcall("ZADD", key.dead(meta.topic), NOW, id)
  if isPush(meta.topic) then
    rcall("RPUSH", key.topicNotices(meta.topic), NOW .. "|" .. id)
    rcall("ZADD", key.noticing, "LT", NOW, meta.topic)
    rcall("ZADD", key.schedule, "LT", NOW, "${SCHEDULE_MARKERS.notices}")
  end
  return save(id, meta, body)
end

-- A reservation failed (its lease ran out, or it was released): the job waits \`wait\` ms
-- (default: its backoff step) and is handed out again, or dies when its attempts are used up
-- or the next attempt would fall after its deadline. The caller has unindexed it. \`keep\` (a
-- lease that ran out) keeps the reservation's receipt, so that its holder may still finish the
-- job until another pop reserves it (scripts/held.ts: finish).
local function retry(id, meta, body, wait, keep)
  if meta.attempts >= meta.maxAttempts then return kill(id, meta, body, "attempts") end
  local due = NOW + (wait or backoff(meta.backoff, meta.attempts))
  if meta.deadline and due > meta.deadline then return kill(id, meta, body, "deadline") end
  meta.state, meta.due, meta.leaseEnd = "waiting", due, nil
  if not keep then meta.receipt = nil end
  meta.messageId = nil
  enqueue(id, meta.topic, due)
  return save(id, meta, body)
end

-- Moves up to \`limit\` due ids of a topic from its delay bucket to its ready list: those due by
-- now, and before \`bound\` when given (the first slot still holding ids, lib/slots.ts: migrate),
-- so that the ready list never gets a job ahead of an earlier one still in a slot list.
local function promote(topic, limit, bound)
  local upTo = NOW
  if bound and bound - 1 < upTo then upTo = bound - 1 end
  local due = rcall("ZRANGE", key.delayed(topic), "-inf", upTo, "BYSCORE", "LIMIT", 0, limit,
    "WITHSCORES")
  if #due == 0 then return 0 end
  local ids, scored = {}, {}
  for i = 1, #due, 2 do
    ids[#ids + 1] = due[i]
    scored[#scored + 1] = due[i + 1]
    scored[#scored + 1] = due[i]
  end
  rcall("ZREM", key.delayed(topic), unpack(ids))
  rcall("ZADD", key.ready(topic), unpack(scored))
  return #ids
end

-- Brings a topic up to now: opens its due slots (up to \`limit\` ids), then promotes its due
-- jobs (up to \`limit\`) in due order. Returns the ids taken off slot lists, the jobs promoted,
-- and the bound (lib/slots.ts: migrate) when open slot lists are left: nothing due from then on
-- may be handed out before they are opened.
local function advance(topic, limit)
  local taken, bound = migrate(topic, limit)
  return taken, promote(topic, limit, bound), bound
end

-- The earliest time something of the topic may need looking at (-1: nothing timed): its first
-- delayed job, its first lease end, the opening of its first slot; then the last two (or nil).
local function nextEvent(topic)
  local due = tonumber(rcall("ZRANGE", key.delayed(topic), 0, 0, "WITHSCORES")[2])
  local lease = tonumber(rcall("ZRANGE", key.reserved(topic), 0, 0, "WITHSCORES")[2])
  local slot = tonumber(rcall("ZRANGE", key.slots(topic), 0, 0, "WITHSCORES")[2])
  if slot then slot = slot - LEAD end
  local nextAt = -1
  for _, at in ipairs({due or false, lease or false, slot or false}) do
    if at and (nextAt < 0 or at < nextAt) then nextAt = at end
  end
  return nextAt, lease, slot
end

-- Takes back up to \`limit\` reservations of a topic whose lease has ended: failed attempts.
-- Returns how many came back and how many of those died.
local function expire(topic, limit)
  local ended = rcall("ZRANGE", key.reserved(topic), "-inf", NOW, "BYSCORE", "LIMIT", 0, limit,
    "WITHSCORES")
  if #ended == 0 then return 0, 0 end
  local ids = {}
  for i = 1, #ended, 2 do ids[#ids + 1] = ended[i] end
  rcall("ZREM", key.reserved(topic), unpack(ids))
  local dead = 0
  for n, id in ipairs(ids) do
    local meta, body = load(id)
    if meta and meta.state == "waiting" then asReserved(meta, tonumber(ended[2 * n])) end
    if meta and meta.state == "reserved" then
      retry(id, meta, body, nil, true)
      if meta.state == "dead" then dead = dead + 1 end
    end
  end
  if dead < #ids then bump(topic) end
  return #ids, dead
end

-- Reserves a waiting job from \`start\` (its lease ends at start + ttr; one more attempt);
-- appends its record as reserved to \`out\` and its lease to \`leases\` ({end, id, ...}, for one
-- ZADD). A pop (no \`nonce\`) leaves the record as it is: the lease is the reservation, and the
-- receipt is derived (popReceipt). A push claim writes it into the record, with the receipt
-- "<nonce>.<n>", n its place in \`out\`. Returns the lease's end; or, when its deadline comes
-- before \`start\`, lets it die instead and returns nil.
local function reserve(id, meta, body, start, nonce, out, leases)
  if meta.deadline and start > meta.deadline then
    kill(id, meta, body, "deadline")
    return nil
  end
  if nonce then
    meta.state, meta.attempts, meta.leaseEnd = "reserved", meta.attempts + 1, start + meta.ttr
    meta.receipt, meta.messageId = nonce .. "." .. #out, nil
    out[#out + 1] = save(id, meta, body)
  else
    out[#out + 1] = encode(asReserved(meta, start + meta.ttr)) .. "\\n" .. body
  end
  leases[#leases + 1] = meta.leaseEnd
  leases[#leases + 1] = id
  return meta.leaseEnd
end

-- Claims up to \`limit\` of a push topic's waiting jobs due by \`horizon\`, earliest first (its
-- open slots are opened first). Each is reserved like a pop (one more attempt, the receipt
-- "<nonce>.<n>") with a lease from its due time: until max(due, now) + ttr; one past its
-- deadline dies instead. Appends the records to \`out\`; then resets the topic's claims entry to
-- the earliest time another of its jobs may need claiming (or removes it), and returns that time
-- (nil: none). \`flow\` (a topic with \`rate\`; else nil): {slot = the first free send time,
-- spacing = ms between sends, at = {}}: each job is sent at the later of its due time and the
-- slot (its lease runs from then), the slot moves on by the spacing, and its send time is
-- appended to \`at\`.
-- Cost: migrate; per index (ready, delayed) ZRANGE (+ ZREM); per job GET + SET; ZADD
-- (reserved), ZADD LT (schedule); then 2 ZRANGEs and the slots' first for the next time, ZADD.
local function claim(topic, horizon, limit, nonce, out, flow)
  local taken, bound = migrate(topic, 1000)
  local leases, first = {}, nil
  for _, index in ipairs({key.ready(topic), key.delayed(topic)}) do
    local want = limit - #out
    if want <= 0 then break end
    local upTo = horizon
    if bound and bound - 1 < upTo then upTo = bound - 1 end
    local due = rcall("ZRANGE", index, "-inf", upTo, "BYSCORE", "LIMIT", 0, want)
    if #due > 0 then rcall("ZREM", index, unpack(due)) end
    for _, id in ipairs(due) do
      local meta, body = load(id)
      if meta and meta.state == "waiting" then
        local start = math.max(meta.due, NOW)
        if flow then start = math.ceil(math.max(start, flow.slot)) end
        local ends = reserve(id, meta, body, start, nonce, out, leases)
        if ends and (first == nil or ends < first) then first = ends end
        if ends and flow then
          flow.at[#flow.at + 1] = start
          flow.slot = start + flow.spacing
        end
      end
    end
  end
  if first ~= nil then
    rcall("ZADD", key.reserved(topic), unpack(leases))
    lowerNext(topic, first, "lease")
  end
  local nextAt = nil
  for _, index in ipairs({key.ready(topic), key.delayed(topic), key.slots(topic)}) do
    local head = rcall("ZRANGE", index, 0, 0, "WITHSCORES")
    local at = tonumber(head[2])
    if at and (nextAt == nil or at < nextAt) then nextAt = at end
  end
  if nextAt then
    rcall("ZADD", key.claims, nextAt, topic)
  else
    rcall("ZREM", key.claims, topic)
  end
  return nextAt
end

-- Sets the schedule's \`${SCHEDULE_MARKERS.push}\` sentinel from the claims index: CLAIM_AHEAD before the earliest
-- time a push topic may need claiming, or none.
local function rearmClaims()
  local head = rcall("ZRANGE", key.claims, 0, 0, "WITHSCORES")
  if head[2] then
    rcall("ZADD", key.schedule, tonumber(head[2]) - CLAIM_AHEAD, "${SCHEDULE_MARKERS.push}")
  else
    rcall("ZREM", key.schedule, "${SCHEDULE_MARKERS.push}")
  end
end

-- The state a client sees: a waiting job is ready once due.
local function stateOf(meta)
  if meta.state == "waiting" then
    if meta.due <= NOW then return "ready" end
    return "delayed"
  end
  return meta.state
end
`;
