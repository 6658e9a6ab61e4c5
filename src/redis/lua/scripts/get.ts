// get: one job's record as a client sees it.
import { defineScript } from "../script";

/** The record, or undefined when there is no such job. */
export const getJob = defineScript<string | undefined>({
  name: "get",
  lua: `
--[[ get: one job's record, with the reservation a pop made filled in: a pop leaves the record
  as it was and the lease zset holds the reservation (lib/transitions.ts: reserve).
  ARGV[4] id
  Returns the record, or false when there is no such job.
  Cost: GET; for a waiting job, ZSCORE (reserved by a pop?).
]]
local id = ARGV[4]
local raw = rcall("GET", key.job(id))
if not raw then return false end
local meta, body = decode(raw)
if reservedByPop(id, meta) then return encode(meta) .. "\\n" .. body end
return raw
`,
  parse(reply) {
    if (reply === null || reply === undefined || reply === false) return undefined;
    if (typeof reply !== "string") {
      throw new Error(`The get script answered ${typeof reply} where a record belongs`);
    }
    return reply;
  },
});
