// delete: removes a job in any state.
import { type CodeName, codeName } from "../../codes";
import { defineScript, list } from "../script";

export const deleteJob = defineScript<{ code: CodeName }>({
  name: "delete",
  lua: `
--[[ delete: removes a job in any state; it is never handed out afterwards. The record is kept
  RETENTION ms as "deleted", so status queries and duplicate adds still see it. Deleting a
  deleted job answers the same.
  ARGV[4] id   ARGV[5] scope (lib/access.ts)
  Returns {CODE.ok}, {CODE.notFound} or {CODE.forbidden} (outside the scope).
  Cost: GET, ZREM (one per index the job is in), SET.
]]
local id = ARGV[4]
local meta, body = load(id)
if not meta then return {CODE.notFound} end
if not allowed(meta.topic, ARGV[5]) then return {CODE.forbidden} end
if meta.state ~= "deleted" then
  unindex(id, meta)
  meta.state, meta.endedAt, meta.leaseEnd = "deleted", NOW, nil
  save(id, meta, body)
end
return {CODE.ok}
`,
  parse: (reply) => ({ code: codeName(list(reply, "delete")[0]) }),
});
