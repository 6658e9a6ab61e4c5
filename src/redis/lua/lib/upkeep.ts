// Lua: pop's own upkeep of a topic whose next has passed, reading each index's first entry once.

/**
 * How many of the delay bucket's first entries pop's upkeep reads in one command: when they
 * are not all due, that one read gives both the due jobs and the bucket's new first entry.
 */
export const UPKEEP_WINDOW = 16;

/** Needs the slot helpers and the transitions (expire, migrate, promote) in scope. */
export const LUA_UPKEEP = `
-- The score of a sorted set's first entry, or nil.
local function head(index)
  return tonumber(rcall("ZRANGE", index, 0, 0, "WITHSCORES")[2])
end

-- Takes the topic's due delayed jobs (before \`bound\` when given, lib/slots.ts: migrate) out of
-- the delay bucket. Reads the bucket's first ${UPKEEP_WINDOW} entries; only when all of them are
-- due does it fall back to the bounded scan (promote, up to 1000, into the ready list).
-- Returns the bucket's first score left (or nil), and the due jobs it took ({id, due, ...}, in
-- due order), for the pop to reserve or to write to the ready list (lib/reserve.ts); or, after
-- the bounded scan, nil and true: due jobs went to the ready list.
local function promoteFirst(topic, bound)
  local upTo = NOW
  if bound and bound - 1 < upTo then upTo = bound - 1 end
  local first = rcall("ZRANGE", key.delayed(topic), 0, ${UPKEEP_WINDOW - 1}, "WITHSCORES")
  if #first == ${2 * UPKEEP_WINDOW} and tonumber(first[#first]) <= upTo then
    promote(topic, 1000, bound)
    return head(key.delayed(topic)), nil, true
  end
  local ids, taken, left = {}, {}, nil
  for i = 1, #first, 2 do
    local at = tonumber(first[i + 1])
    if at > upTo then
      left = at
      break
    end
    ids[#ids + 1] = first[i]
    taken[#taken + 1], taken[#taken + 2] = first[i], at
  end
  if #ids > 0 then rcall("ZREM", key.delayed(topic), unpack(ids)) end
  return left, taken
end

-- Brings a topic whose next has passed up to now, for pop: takes back expired reservations (up
-- to 100), opens due slots (up to 1000 ids), promotes due jobs, then sets the topic's timing
-- (lib/topic.ts). The first lease and the first slot are read only when their bounds in the
-- topic's timing have passed (or are unknown), and an index is scanned only when its first entry
-- is due, so a pop with one job falling due reads the delay bucket's first entries and no more.
-- The schedule's entry is only lowered, never raised: a lower bound is all the tick needs (it
-- visits early, finds nothing due and sets it exactly), and it saves a write on every such pop.
-- Returns the bound of migrate (open slot lists left) or nil, the due jobs taken out of the
-- delay bucket (promoteFirst), which the caller must reserve or write to the ready list, and
-- whether jobs may have been written to the ready list instead: reservations taken back, or
-- more due jobs than the window holds.
-- Cost, one job falling due and no lease or slot bound passed: ZRANGE (delayed), ZREM, SET
-- (timing).
local function catchUp(topic)
  local t = fields(topic)
  local passed, lease, bound, wrote = t.next, t.lease, nil, false
  if lease == nil or (lease and lease <= NOW) then
    lease = head(key.reserved(topic))
    if lease and lease <= NOW then
      wrote = expire(topic, 100) > 0
      lease = head(key.reserved(topic))
    end
  end
  -- Read after the leases: a reservation taken back may have gone to a slot list, lowering the
  -- bound (lowerNext), which must not be written back over with the value from before.
  local slot = t.slot
  if slot == nil or (slot and slot <= NOW) then
    slot = head(key.slots(topic))
    if slot and slot - LEAD <= NOW then
      local _
      _, bound = migrate(topic, 1000)
      slot = head(key.slots(topic))
    end
    slot = slot and slot - LEAD
  end
  local nextAt, fresh, bulk = promoteFirst(topic, bound)
  for _, at in ipairs({lease or false, slot or false}) do
    if at and (nextAt == nil or at < nextAt) then nextAt = at end
  end
  writeTiming(topic, nextAt or false, lease or false, slot or false)
  if nextAt and passed and nextAt < passed then rcall("ZADD", key.schedule, "LT", nextAt, topic) end
  return bound, fresh, wrote or bulk == true
end
`;
