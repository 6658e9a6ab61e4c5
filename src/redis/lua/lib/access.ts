// Lua: who may act on what — topic scopes, and loading a job the caller must hold.

/** Needs the record's `load`, the transitions (popReceipt, asReserved) and CODE in scope. */
export const LUA_ACCESS = `
-- Whether a caller whose scope is \`scope\` (Lua patterns, one per line; "" for every topic)
-- may act on the topic (src/domain/scope.ts: scopeToLua).
local function allowed(topic, scope)
  if scope == "" then return true end
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
`;
