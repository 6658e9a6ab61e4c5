// topicStats, listTopics and configure: the scripts about topics as a whole.
import { defineScript, list } from "../script";

/** One topic's stats as the scripts count them. */
export type TopicRow = {
  topic: string;
  delayed: number;
  ready: number;
  reserved: number;
  dead: number;
  /** The earliest due time among waiting jobs (unix ms), or undefined. */
  oldestDueAt: number | undefined;
  /** The config JSON, "" for none. */
  config: string;
};

const TOPIC_STATS_FN = `
-- Counts per state in O(log n), the earliest due time (-1: none) and the config JSON ("": none).
-- Jobs in slot lists count as delayed.
local function stats(topic)
  -- Ids of open slots are moved first (up to 1000; a tick or pop moves them too), so that the
  -- jobs counted as slotted are all due later than now.
  migrate(topic, 1000)
  local due = rcall("ZCOUNT", key.delayed(topic), "-inf", NOW)
  local slotted = tonumber(rcall("GET", key.slotted(topic)) or "0")
  local delayed = rcall("ZCARD", key.delayed(topic)) - due + slotted
  local ready = rcall("ZCARD", key.ready(topic)) + due
  local oldest = -1
  for _, index in ipairs({key.ready(topic), key.delayed(topic)}) do
    local first = rcall("ZRANGE", index, 0, 0, "WITHSCORES")
    if first[2] and (oldest < 0 or tonumber(first[2]) < oldest) then oldest = tonumber(first[2]) end
  end
  if oldest < 0 and slotted > 0 then
    -- Only slotted jobs: the start of the first slot, a lower bound of their due times.
    local first = rcall("ZRANGE", key.slots(topic), 0, 0, "WITHSCORES")
    if first[2] then oldest = tonumber(first[2]) end
  end
  return {topic, delayed, ready, rcall("ZCARD", key.reserved(topic)),
    rcall("ZCARD", key.dead(topic)), oldest, rcall("GET", key.config(topic)) or ""}
end
local out = {}
local function report(topic)
  for _, value in ipairs(stats(topic)) do out[#out + 1] = value end
end
`;

/** The rows of a flat reply: 7 values per topic. */
function rows(flat: readonly unknown[]): TopicRow[] {
  const out: TopicRow[] = [];
  for (let i = 0; i + 6 < flat.length; i += 7) {
    const [topic, delayed, ready, reserved, dead, oldest, config] = flat.slice(i, i + 7);
    out.push({
      topic: String(topic),
      delayed: Number(delayed),
      ready: Number(ready),
      reserved: Number(reserved),
      dead: Number(dead),
      oldestDueAt: Number(oldest) >= 0 ? Number(oldest) : undefined,
      config: typeof config === "string" ? config : "",
    });
  }
  return out;
}

export const topicStats = defineScript<TopicRow[]>({
  name: "topicStats",
  lua: `
--[[ topicStats: counts and config of the topics named.
  ARGV[4..] topics
  Returns 7 values per topic: name, delayed, ready, reserved, dead, earliest due (or -1),
  config JSON (or "").
  Cost: 11 commands per topic (12 when only slotted jobs wait; more when a slot just opened),
  none of them a scan.
]]
${TOPIC_STATS_FN}
for i = 4, #ARGV do report(ARGV[i]) end
return out
`,
  parse: (reply) => rows(list(reply, "topicStats")),
});

export const listTopics = defineScript<{ topics: TopicRow[]; more: boolean }>({
  name: "listTopics",
  lua: `
--[[ listTopics: a page of topics by name, with their stats.
  ARGV[4] the last name of the previous page, or ""   ARGV[5] page size
  Returns 1 if another page follows, else 0; then what topicStats returns for each topic.
  Cost: ZRANGE BYLEX (one name more than the page), then topicStats's per topic.
]]
${TOPIC_STATS_FN}
local from, size = "-", tonumber(ARGV[5])
if ARGV[4] ~= "" then from = "(" .. ARGV[4] end
local names = rcall("ZRANGE", key.topics, from, "+", "BYLEX", "LIMIT", 0, size + 1)
out[1] = 0
if #names > size then out[1] = 1 end
for i = 1, math.min(#names, size) do report(names[i]) end
return out
`,
  parse(reply) {
    const [more, ...flat] = list(reply, "listTopics");
    return { topics: rows(flat), more: Number(more) === 1 };
  },
});

export const configure = defineScript<void>({
  name: "configure",
  lua: `
--[[ configure: sets a topic's config (defaults for new jobs, paused).
  ARGV[4] topic   ARGV[5] config JSON
  Returns 1. Cost: SET, ZADD NX, INCR (seq: an unpaused topic wakes its long-polls).
]]
rcall("SET", key.config(ARGV[4]), ARGV[5])
rcall("ZADD", key.topics, "NX", 0, ARGV[4])
bump(ARGV[4])
return 1
`,
  parse: () => undefined,
});
