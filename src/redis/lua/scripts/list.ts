// list: one page of a topic's jobs in one state.
import { list as asList, defineScript, record } from "../script";

/** A page of records; `cursor` is absent on the last page. */
export type ListReply = { records: string[]; cursor?: string };

export const list = defineScript<ListReply>({
  name: "list",
  lua: `
--[[ list: one page of a topic's jobs in one state, in index order (due time for delayed and
  ready, lease end for reserved, time of death for dead). Delayed jobs in slot lists come after
  the delayed zset's, slot by slot, each slot in the order its jobs came. Moves open slots and
  promotes due jobs first (up to 1000 each) so that delayed and ready split at now.
  ARGV[4] topic   ARGV[5] delayed | ready | reserved | dead
  ARGV[6] cursor: an offset into the state's zset, or "<slot start>:<offset>" in the slot lists
  ARGV[7] limit
  Returns {the next page's cursor, or -1 on the last page; then the records}. A page of slotted
  jobs may hold fewer than \`limit\` (entries of deleted or moved jobs are skipped).
  Cost: migrate, promote, ZRANGE (one id more than the page, to know whether another page
  follows), per job GET; for slotted jobs a ZRANGE of slots and an LRANGE per slot read.
]]
local topic, state, cursor, limit = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
advance(topic, 1000)
local out = {-1}
local room, from, at = limit, "-inf", 0
local slot, offset = string.match(cursor, "^(%d+):(%d+)$")
if slot then
  from, at = slot, tonumber(offset)
else
  offset = tonumber(cursor)
  local ids = rcall("ZRANGE", key[state](topic), offset, offset + limit)
  for i = 1, math.min(#ids, limit) do
    local raw = rcall("GET", key.job(ids[i]))
    if raw then out[#out + 1] = raw end
  end
  if #ids > limit then
    out[1] = offset + limit
    return out
  end
  if state ~= "delayed" then return out end
  room = limit - #ids
end
-- The slot lists, from slot \`from\` at offset \`at\`. A slot list holds an id twice only when
-- a job was deleted while slotted and added again (replace) into the same slot: such an id is
-- listed once per page.
local seen = {}
local slots = rcall("ZRANGE", key.slots(topic), from, "+inf", "BYSCORE", "LIMIT", 0, room + 1)
for n, name in ipairs(slots) do
  if room == 0 then
    out[1] = name .. ":0"
    break
  end
  local ids = rcall("LRANGE", slotList(topic, name), at, at + room)
  for i = 1, math.min(#ids, room) do
    local raw = not seen[ids[i]] and rcall("GET", key.job(ids[i]))
    if raw then
      local meta = decode(raw)
      if meta.state == "waiting" and meta.topic == topic and slotOf(meta.due) == tonumber(name) then
        out[#out + 1] = raw
        seen[ids[i]] = true
      end
    end
  end
  if #ids > room then
    out[1] = name .. ":" .. (at + room)
    break
  end
  room, at = room - #ids, 0
end
return out
`,
  parse(reply) {
    const [next, ...records] = asList(reply, "list");
    const page = records.map((raw) => record(raw, "list"));
    // -1 on the last page; otherwise an offset, or "<slot>:<offset>" in the slot lists.
    return String(next) !== "-1" ? { records: page, cursor: String(next) } : { records: page };
  },
});
