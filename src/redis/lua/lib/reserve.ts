// Lua: reserving a topic's due jobs for pop, from its ready list and from what upkeep found due.

/** Needs the record codec and the transitions (enqueue, kill, lowerNext) in scope. */
export const LUA_RESERVE = `
-- Whether entry (id x, score sx) comes before (y, sy) in a sorted set: by score, then by id.
local function before(x, sx, y, sy)
  sx, sy = tonumber(sx), tonumber(sy)
  return sx < sy or (sx == sy and x < y)
end

-- Merges two flat {id, score, ...} lists, each in sorted-set order, into one in that order; the
-- first \`want\` entries are the candidates, the others are returned as {score, id, ...} to go
-- to the ready list.
local function mergeDue(a, b, want)
  local merged, back, i, j = {}, {}, 1, 1
  while i <= #a or j <= #b do
    local fromA = j > #b or (i <= #a and before(a[i], a[i + 1], b[j], b[j + 1]))
    local id, score
    if fromA then
      id, score, i = a[i], a[i + 1], i + 2
    else
      id, score, j = b[j], b[j + 1], j + 2
    end
    if #merged < 2 * want then
      merged[#merged + 1], merged[#merged + 2] = id, score
    else
      back[#back + 1], back[#back + 2] = score, id
    end
  end
  return merged, back
end

-- Reserves up to \`count\` of the topic's ready jobs due by now, earliest due first: each counts
-- an attempt and is leased until now + its ttr, its record left as it was (lib/transitions.ts:
-- reserve). A job whose deadline has passed dies instead, and the next ready one is taken in
-- its place (up to 10 rounds, so a run of expired jobs cannot hold the call long). With a
-- \`bound\` (open slot lists left after a clock jump), only jobs due before it: the ones due
-- later wait until the lists before them are opened, so that the earliest due still go first.
-- \`fresh\` ({id, due, ...}, in due order) are jobs this call's upkeep took out of the delay
-- bucket (lib/upkeep.ts): they are candidates beside the ready list's first ones, and only those
-- not taken are written to the ready list. \`pre\`, when given, is the first round's ZPOPMIN,
-- made by the caller ({id, due, ...}), and \`records\` the records it read with it, by id.
-- Returns the reserved records, and whether more jobs may be ready: false when fewer than
-- \`count\` were found, or the ready list is known to be empty; when it is not known and \`ask\`
-- is set (other callers wait for this topic), a ZCARD of the ready list says (unless fresh jobs
-- were just written there); else true. Third, whether the ready list is known to be empty now
-- (its last ZPOPMIN came back short, or that ZCARD found nothing): the caller may then tell when
-- to look again.
-- Cost: per round ZPOPMIN (none in the first with \`pre\`), per job GET (none for \`records\`);
-- a ZADD (ready) when fresh jobs are left over; then ZADD (reserved), and only when the first
-- lease ends before the topic's bounds, SET (timing; and ZADD LT when it lowers the next:
-- lowerNext); a ZCARD when \`ask\` needs it.
local function reserveReady(topic, count, bound, fresh, ask, pre, records)
  local out, leases, first, known, wrote = {}, {}, nil, false, false
  for _ = 1, 10 do
    local want = count - #out
    local popped = pre or rcall("ZPOPMIN", key.ready(topic), want)
    pre = nil
    local exhausted = #popped < 2 * want
    wrote = false
    if fresh and #fresh > 0 then
      local back
      popped, back = mergeDue(popped, fresh, want)
      if #back > 0 then rcall("ZADD", key.ready(topic), unpack(back)) end
      -- Left over fresh jobs are in the ready list now: the next round may find them there.
      exhausted = exhausted and #back == 0
      wrote = #back > 0
    end
    fresh = nil
    if #popped == 0 then
      known = true
      break
    end
    local later = {}
    for i = 1, #popped, 2 do
      local id, due = popped[i], tonumber(popped[i + 1])
      local meta, body = nil, nil
      -- Only what is due by this call's own clock: a call that spent long in transit may carry
      -- an older "now" than the one that promoted a job, and must not hand it out before then.
      if due > NOW or (bound and due >= bound) then
        later[#later + 1] = due
        later[#later + 1] = id
      elseif records and records[id] then
        meta, body = decode(records[id])
      else
        meta, body = load(id)
      end
      if meta and meta.state == "waiting" and meta.due > NOW then
        -- Not due by its record (never expected: ready ids are due): put it back in place.
        enqueue(id, topic, meta.due)
      elseif meta and meta.state == "waiting" then
        local ends = reserve(id, meta, body, NOW, nil, out, leases)
        if ends and (first == nil or ends < first) then first = ends end
      end
    end
    if #later > 0 then
      rcall("ZADD", key.ready(topic), unpack(later))
      break
    end
    known = exhausted
    if #out >= count or exhausted then break end
  end
  if first ~= nil then
    rcall("ZADD", key.reserved(topic), unpack(leases))
    lowerNext(topic, first, "lease")
  end
  local more = #out >= count and not known
  -- Fresh jobs left over were just written to the ready list: more is ready, no need to ask.
  if more and ask and not wrote then
    more = rcall("ZCARD", key.ready(topic)) > 0
    known = not more
  end
  return out, more, known
end
`;
