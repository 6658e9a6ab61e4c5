// list: one page of a topic's jobs in one state.
import { asArray, defineScript, record } from "../script";

/** A page of records; `cursor` is absent on the last page. */
export type ListReply = { records: string[]; cursor?: string };

export const list = defineScript<ListReply>({
  name: "list",
  lua: `
--[[ list: one page of a topic's jobs in one state, in index order (due time for delayed and
  ready, lease end for reserved, time of death for dead). Delayed jobs in slot lists come after
  the delayed zset's, slot by slot, each slot in the order its jobs came. Moves open slots and
  promotes due jobs first (lib/transitions.ts: advance) so that delayed and ready split at now.
  ARGV[4] topic   ARGV[5] delayed | ready | reserved | dead   ARGV[7] limit
  ARGV[6] cursor: "" for the first page; "z<score>:<id>" resumes the state's zset after that
          entry (keyset: entries that leave or join before it shift nothing); "s<slot>:<offset>"
          resumes delayed jobs in the slot lists (delayed only).
  A job that stays in its state from the first page to the last is listed (issue 8.8): when the
  slot a cursor points into has opened meanwhile, its ids are in the delayed zset, which is
  listed again from that slot's start (a job may then show up on two pages, never on none).
  Returns {the next page's cursor, or "" on the last page; then the records}. A page of slotted
  jobs may hold fewer than \`limit\` (entries of deleted or moved jobs are skipped).
  Cost: advance; ZSCORE + ZRANK (or ZCOUNT) to find the cursor, ZRANGE of one entry more than
  the page, per job GET; for slotted jobs a ZRANGE of slots and an LRANGE per slot read.
]]
local topic, state, cursor, limit = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
advance(topic, 1000)
local index = key[state](topic)
local out = {""}
local room = limit

-- The zset from the entry after (score, id), or from the first with that score when the entry
-- has left the index (id "" also means that).
local function fromZset(score, id)
  local start = 0
  if score then
    local current = id ~= "" and rcall("ZSCORE", index, id)
    if current and tonumber(current) == score then
      start = rcall("ZRANK", index, id) + 1
    else
      start = rcall("ZCOUNT", index, "-inf", "(" .. score)
    end
  end
  local page = rcall("ZRANGE", index, start, start + room, "WITHSCORES")
  local n = math.min(#page / 2, room)
  for i = 1, n do
    local raw = rcall("GET", key.job(page[2 * i - 1]))
    if raw and state == "reserved" then
      -- A pop's reservation is its lease entry; the record still reads as before the pop.
      local meta, body = decode(raw)
      if meta.state == "waiting" then
        raw = encode(asReserved(meta, tonumber(page[2 * i]))) .. "\\n" .. body
      end
    end
    if raw then out[#out + 1] = raw end
  end
  if #page / 2 > room then
    out[1] = "z" .. page[2 * n] .. ":" .. page[2 * n - 1]
    return false
  end
  room = room - n
  return true
end

-- The slot lists, from slot \`from\` at offset \`at\` (the offset applies to that slot only).
-- An id listed twice in a slot (a job replaced into its own slot) is listed once per page.
local function fromSlots(from, at)
  local seen = {}
  local fetch, ended = room + 1, 0
  local slots = rcall("ZRANGE", key.slots(topic), from, "+inf", "BYSCORE", "LIMIT", 0, fetch)
  for _, name in ipairs(slots) do
    if name ~= tostring(from) then at = 0 end
    if room == 0 then
      out[1] = "s" .. name .. ":0"
      return
    end
    local ids = rcall("LRANGE", slotList(topic, name), at, at + room)
    for i = 1, math.min(#ids, room) do
      local raw = not seen[ids[i]] and rcall("GET", key.job(ids[i]))
      if raw then
        local meta = decode(raw)
        -- A stale id of a job due by now may be one a pop reserved (its record reads waiting).
        if meta.state == "waiting" and meta.topic == topic and holds(tonumber(name), meta.due)
          and not (meta.due <= NOW and rcall("ZSCORE", key.reserved(topic), ids[i]))
        then
          out[#out + 1] = raw
          seen[ids[i]] = true
        end
      end
    end
    if #ids > room then
      out[1] = "s" .. name .. ":" .. (at + room)
      return
    end
    room, at, ended = room - #ids, 0, at + #ids
  end
  -- Every slot read ended inside the page, but a slot that gave no id (the cursor's slot, read
  -- past its end) left the read cut short of the slots after it: go on from the last one's end.
  if #slots == fetch then
    out[1] = "s" .. slots[#slots] .. ":" .. ended
  end
end

local zScore, zId = string.match(cursor, "^z(%d+):(.*)$")
local slot, offset = string.match(cursor, "^s(%d+):(%d+)$")
if slot and state == "delayed" then
  slot = tonumber(slot)
  if rcall("ZSCORE", key.slots(topic), slot) then
    fromSlots(slot, tonumber(offset))
    return out
  end
  -- The slot opened since the last page: its jobs are in the zset now, from its start on.
  zScore, zId = slot, ""
end
if fromZset(tonumber(zScore), zId or "") and state == "delayed" then fromSlots("-inf", 0) end
return out
`,
  parse(reply) {
    const [next, ...records] = asArray(reply, "list");
    const page = records.map((raw) => record(raw, "list"));
    return next ? { records: page, cursor: String(next) } : { records: page };
  },
});
