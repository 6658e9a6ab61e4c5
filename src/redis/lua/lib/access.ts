// Lua: who may act on what — topic scopes, and loading a job the caller must hold.

/** Needs the record's `load`, the transitions (popReceipt, asReserved) and CODE in scope. */
export const LUA_ACCESS = `
-- Whether a caller whose scope is \`scope\` (Lua patterns, one per line; "" for every topic)
-- may act on the topic (src/domain/scope.ts: scopeToLua).
local function allowed(topic, scope)
  if scope == "" then return true end
  -- delayq's own topics (__payments: every watch's poll job) are no limited token's.
  if string.sub(topic, 1, 2) == "__" then return false end
  for pattern in string.gmatch(scope, "[^\\n]+") do
    if string.find(topic, pattern) then return true end
  end
  return false
end

-- Loads a job the caller must hold. Returns meta, body, CODE.ok; or nil-or-meta, body and
-- CODE.notFound (no such job), CODE.forbidden (its topic is outside the caller's scope),
-- CODE.staleReceipt (a receipt was given and is not the job's current or last one) or
-- CODE.notReserved. A job a pop reserved comes back filled in as reserved (lib/transitions.ts:
-- asReserved), and the fourth value says so: its record still reads as it did before the pop.
-- With \`take\`, the reservation found also loses its lease entry (finish, release, bury: the
-- caller writes the record next); the ZREM is then what tells a pop's reservation.
-- Cost: GET; ZREM with \`take\`, else for a waiting job ZSCORE.
local function held(id, receipt, scope, take)
  local meta, body = load(id)
  if not meta then return nil, nil, CODE.notFound end
  if not allowed(meta.topic, scope) then return nil, nil, CODE.forbidden end
  if meta.state == "waiting" then
    local current = popReceipt(meta)
    if receipt ~= "" and receipt ~= current then
      -- A receipt of an earlier reservation: only the last one (kept for a late finish) counts,
      -- and only while nobody has reserved the job since.
      if reservedByPop(id, meta) or receipt ~= meta.receipt then
        return meta, body, CODE.staleReceipt
      end
      return meta, body, CODE.notReserved
    end
    if take then
      if rcall("ZREM", key.reserved(meta.topic), id) == 0 then
        return meta, body, receipt == "" and CODE.notReserved or CODE.staleReceipt
      end
      asReserved(meta, nil)
    elseif not reservedByPop(id, meta) then
      return meta, body, receipt == "" and CODE.notReserved or CODE.staleReceipt
    end
    return meta, body, CODE.ok, true
  end
  if receipt ~= "" and receipt ~= meta.receipt then return meta, body, CODE.staleReceipt end
  if meta.state ~= "reserved" then return meta, body, CODE.notReserved end
  if take then rcall("ZREM", key.reserved(meta.topic), id) end
  return meta, body, CODE.ok, false
end

-- Finishes a job the caller holds (the finish script, and pop's jobs to finish first). Its
-- record is kept RETENTION ms for status queries and duplicate adds. Finishing it again with
-- its receipt (or none) answers the same, so a client may retry a finish whose answer it lost.
-- A late finish (the lease ran out and the job waits for its next attempt, nobody has reserved
-- it since) is accepted with that reservation's receipt (lib/transitions.ts: retry keeps it),
-- sparing a second run. Returns CODE.ok and "finished", or an error code and the job's current
-- state ("" for none). Cost: GET, ZREM (the lease), SET (a late finish: GET, ZREM, ZREM, SET).
local function finishHeld(id, receipt, scope)
  local meta, body, code = held(id, receipt, scope, true)
  if code == CODE.notReserved and meta.state == "finished" then
    code = CODE.ok
  elseif code == CODE.notReserved and receipt ~= "" and meta.state == "waiting" then
    unindex(id, meta)
    code = CODE.ok
  end
  if code ~= CODE.ok then return code, meta and stateOf(meta) or "" end
  if meta.state ~= "finished" then
    meta.state, meta.endedAt, meta.leaseEnd = "finished", NOW, nil
    save(id, meta, body)
  end
  return CODE.ok, "finished"
end
`;
