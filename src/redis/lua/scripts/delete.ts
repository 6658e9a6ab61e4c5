// delete: removes a job in any state.
import { type CodeName, codeName } from "../../codes";
import { asArray, defineScript } from "../script";

/** The outcome; `messageId` when the job was published to QStash and must be cancelled. */
export const deleteJob = defineScript<{ code: CodeName; messageId?: string }>({
  name: "delete",
  lua: `
--[[ delete: removes a job in any state; it is never handed out afterwards. The record is kept
  RETENTION ms as "deleted", so status queries and duplicate adds still see it. Deleting a
  deleted job answers the same, with the QStash message its delivery was published as, if any:
  a delete repeated because the cancel failed cancels it again (QStash answers 404 to a message
  it no longer holds).
  ARGV[4] id   ARGV[5] scope (lib/access.ts)
  Returns {CODE.ok, the QStash message id of its current delivery or ""}, {CODE.notFound} or
  {CODE.forbidden} (outside the scope). The caller cancels that message before answering.
  Cost: GET, ZREM (one per index until the job's: a job a pop reserved takes three), SET.
]]
local id = ARGV[4]
local meta, body = load(id)
if not meta then return {CODE.notFound} end
if not allowed(meta.topic, ARGV[5]) then return {CODE.forbidden} end
if meta.state ~= "deleted" then
  unindex(id, meta)
  -- Only a delivery in flight keeps its message id, for the cancel (and a repeated delete's).
  if meta.state ~= "reserved" then meta.messageId = nil end
  -- The reservation ends with it: its receipt is then stale (\`stale_receipt\`, "deleted").
  meta.state, meta.endedAt, meta.leaseEnd = "deleted", NOW, nil
  meta.receipt = nil
  save(id, meta, body)
end
return {CODE.ok, meta.messageId or ""}
`,
  parse(reply) {
    const [code, messageId] = asArray(reply, "delete");
    return messageId
      ? { code: codeName(code), messageId: String(messageId) }
      : { code: codeName(code) };
  },
});
