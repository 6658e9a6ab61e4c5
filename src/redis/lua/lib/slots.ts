// Lua: slot lists, where jobs due far ahead wait as bare ids (keys.ts: slots), and their opening.

/**
 * Width of a slot list, ms. A waiting job's slot starts at the last hh:mm:30 at or before its
 * due time (`slotOf`); while that start is more than SLOT_LEAD_MS from now the job waits as an id
 * in the slot's list, and the slot "opens" SLOT_LEAD_MS before it starts: its ids move to the
 * delayed zset (`migrate`). So only jobs due within the next 1.5 to 2.5 minutes sit in the zset
 * (~100 bytes an entry), the rest in lists (~15).
 */
export const SLOT_MS = 60_000;
/** How long before its start a slot opens, ms: more than a push claim looks ahead (65 s). */
export const SLOT_LEAD_MS = 90_000;
/**
 * Where a slot starts within its width, ms. Versions up to 37f6d42 had 10-minute slots
 * starting on multiples of LEGACY_SLOT_MS; today's start at half past a minute, so a start says
 * which width its list was written with, and lists written before an upgrade still open whole.
 */
export const SLOT_PHASE_MS = 30_000;
export const LEGACY_SLOT_MS = 600_000;
/**
 * Most slot lists one call opens (lib Lua \`migrate\`). Enough for a topic nobody called for
 * 16 hours: a pop that meets a long-idle topic opens its due slots itself instead of handing
 * out nothing until ticks have opened them (10 a call did: a topic idle for more than 10 slots
 * whose first 10 lists held only stale ids gave nothing). A slot list costs 3 commands to open
 * (LRANGE, DEL, ZREM) whichever call opens it: the limit bounds one call's time, not the cost.
 */
export const MIGRATE_SLOTS = 1000;

/** Needs `rcall`, `key` and NOW in scope, and the record's `load`. */
export const LUA_SLOTS = `
local SLOT, LEAD, PHASE, LEGACY = ${SLOT_MS}, ${SLOT_LEAD_MS}, ${SLOT_PHASE_MS}, ${LEGACY_SLOT_MS}
local MIGRATE_SLOTS = ${MIGRATE_SLOTS}
-- Slots: a job due at \`due\` belongs to the slot starting at slotOf(due). A slot is far while it
-- starts more than LEAD after now, and open from then on.
local function slotOf(due) return due - ((due - PHASE) % SLOT) end
local function isFar(due) return slotOf(due) > NOW + LEAD end
-- Whether the list of the slot starting at \`slot\` is where a job due at \`due\` waits: its own
-- slot, or for a list of an earlier version (a start on a multiple of LEGACY) its 10-minute one.
local function holds(slot, due)
  if slot % LEGACY == 0 then return due - (due % LEGACY) == slot end
  return slotOf(due) == slot
end
local function slotList(topic, slot) return key.slots(topic) .. ":" .. slot end

-- Files ids of a topic under a far slot: the list, the slot index, the count, the schedule
-- (the tick must come when the slot opens).
local function toSlot(topic, slot, ids)
  rcall("RPUSH", slotList(topic, slot), unpack(ids))
  rcall("ZADD", key.slots(topic), slot, slot)
  rcall("INCRBY", key.slotted(topic), #ids)
  lowerNext(topic, slot - LEAD, "slot")
end

-- Ids a pop has taken off the ready list and not yet handed out (scripts/pop.ts): for migrate
-- they are still in it.
local popping = {}

-- Moves up to \`limit\` ids from the topic's open slot lists (oldest slot first, at most
-- MIGRATE_SLOTS slots) to the delayed zset; the promote that follows moves the due ones on. An
-- id whose job no longer waits in that slot (deleted, replaced, handed out) is dropped, and so
-- is one whose job is indexed already (an id listed twice; a job replaced to a due time in a
-- slot that was open): a waiting job is always in exactly one index. Returns how many ids it
-- took off the lists, and the start of the first open slot it did not empty (nil when none is
-- left): jobs due from then on may still sit in a list, so nothing due after it may be promoted
-- yet (issue 8.9).
-- Cost: one ZRANGE; per slot visited LRANGE (and LTRIM for one it leaves unemptied); one DEL and
-- one ZREM for the lists emptied; per id one GET; then ZMSCORE (ready), ZMSCORE (reserved),
-- ZADD, DECRBY, ZADD LT.
local function migrate(topic, limit)
  local slots = rcall("ZRANGE", key.slots(topic), "-inf", NOW + LEAD, "BYSCORE", "LIMIT", 0,
    MIGRATE_SLOTS + 1)
  if #slots == 0 then return 0, nil end
  local taken, ids, dues, seen, bound, emptied, lists = 0, {}, {}, {}, nil, {}, {}
  for n, slot in ipairs(slots) do
    local want = limit - taken
    if want <= 0 or n > MIGRATE_SLOTS then
      bound = tonumber(slot)
      break
    end
    local list = slotList(topic, slot)
    local listed = rcall("LRANGE", list, 0, want - 1)
    if #listed < want then
      emptied[#emptied + 1], lists[#lists + 1] = slot, list
    else
      rcall("LTRIM", list, want, -1)
      bound = tonumber(slot)
    end
    taken = taken + #listed
    for _, id in ipairs(listed) do
      local meta = not seen[id] and load(id)
      if meta and meta.state == "waiting" and meta.topic == topic
        and holds(tonumber(slot), meta.due) then
        ids[#ids + 1], dues[#ids + 1], seen[id] = id, meta.due, true
      end
    end
    if bound then break end
  end
  if #emptied > 0 then
    rcall("DEL", unpack(lists))
    rcall("ZREM", key.slots(topic), unpack(emptied))
  end
  if #ids == 0 then return taken, bound end
  -- Indexed already: in the ready list, or reserved by a pop (its record still reads waiting).
  local inReady = rcall("ZMSCORE", key.ready(topic), unpack(ids))
  local leased = rcall("ZMSCORE", key.reserved(topic), unpack(ids))
  local scored, earliest = {}, nil
  for n, id in ipairs(ids) do
    if not inReady[n] and not leased[n] and not popping[id] then
      scored[#scored + 1] = dues[n]
      scored[#scored + 1] = id
      if earliest == nil or dues[n] < earliest then earliest = dues[n] end
    end
  end
  if #scored == 0 then return taken, bound end
  local indexed = rcall("ZADD", key.delayed(topic), unpack(scored))
  if indexed > 0 then rcall("DECRBY", key.slotted(topic), indexed) end
  lowerNext(topic, earliest)
  return taken, bound
end
`;
