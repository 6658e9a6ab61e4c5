// Lua: who may act on what — topic scopes, and loading a job the caller must hold.

/** Needs the record's `load` and CODE in scope. */
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
-- CODE.notReserved.
local function held(id, receipt, scope)
  local meta, body = load(id)
  if not meta then return nil, nil, CODE.notFound end
  if not allowed(meta.topic, scope) then return nil, nil, CODE.forbidden end
  if receipt ~= "" and receipt ~= meta.receipt then return meta, body, CODE.staleReceipt end
  if meta.state ~= "reserved" then return meta, body, CODE.notReserved end
  return meta, body, CODE.ok
end
`;
