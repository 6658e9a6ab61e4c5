// topicStats, listTopics and configure: the scripts about topics as a whole.
import { asArray, defineScript, jsonText } from "../script";

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
  /** Push deliveries: answered (done, retry, bury) and failed attempts. */
  delivered: number;
  failed: number;
};

const TOPIC_STATS_FN = `
-- Counts per state in O(log n), the earliest due time (-1: none) and the config JSON ("": none).
-- Jobs in slot lists count as delayed.
local function stats(topic)
  -- Ids of open slots are moved first (up to 1000; a tick or pop moves them too), so that the
  -- jobs counted as slotted are all due later than now; not looked for while the topic's
  -- timing says its first slot opens later (or that it has none), as pop's upkeep does.
  local slot = fields(topic).slot
  if slot == nil or (slot and slot <= NOW) then migrate(topic, 1000) end
  local slotted = tonumber(rcall("GET", key.slotted(topic)) or "0")
  local delayed = rcall("ZCARD", key.delayed(topic))
  local ready = rcall("ZCARD", key.ready(topic))
  -- An empty index has no first entry to read, and due jobs not promoted yet (counted as ready)
  -- are counted only when the first delayed one is due.
  local firstDelayed = delayed > 0 and head(key.delayed(topic))
  local firstReady = ready > 0 and head(key.ready(topic))
  local due = 0
  if firstDelayed and firstDelayed <= NOW then
    due = rcall("ZCOUNT", key.delayed(topic), "-inf", NOW)
  end
  delayed, ready = delayed - due + slotted, ready + due
  local oldest = firstReady or -1
  if firstDelayed and (oldest < 0 or firstDelayed < oldest) then oldest = firstDelayed end
  if oldest < 0 and slotted > 0 then
    -- Only slotted jobs: the start of the first slot, a lower bound of their due times.
    oldest = head(key.slots(topic)) or -1
  end
  local pushed = rcall("HMGET", key.stats(topic), "delivered", "failed")
  return {topic, delayed, ready, rcall("ZCARD", key.reserved(topic)),
    rcall("ZCARD", key.dead(topic)), oldest, fields(topic).config or "",
    tonumber(pushed[1] or "0"), tonumber(pushed[2] or "0")}
end
local out = {}
local function report(topic)
  for _, value in ipairs(stats(topic)) do out[#out + 1] = value end
end
`;

/** The rows of a flat reply: 9 values per topic. */
function rows(flat: readonly unknown[]): TopicRow[] {
  const out: TopicRow[] = [];
  for (let i = 0; i + 8 < flat.length; i += 9) {
    const [topic, delayed, ready, reserved, dead, oldest, config, delivered, failed] = flat.slice(
      i,
      i + 9,
    );
    out.push({
      topic: String(topic),
      delayed: Number(delayed),
      ready: Number(ready),
      reserved: Number(reserved),
      dead: Number(dead),
      oldestDueAt: Number(oldest) >= 0 ? Number(oldest) : undefined,
      config: jsonText(config),
      delivered: Number(delivered),
      failed: Number(failed),
    });
  }
  return out;
}

export const topicStats = defineScript<TopicRow[]>({
  name: "topicStats",
  lua: `
--[[ topicStats: counts and config of the topics named.
  ARGV[4..] topics
  Returns 9 values per topic: name, delayed, ready, reserved, dead, earliest due (or -1),
  config JSON (or ""), push deliveries answered, push attempts failed.
  Cost per topic, none of them a scan: 7 commands for an empty topic (MGET of its fields, GET
  slotted, 4 ZCARD, HMGET), one ZRANGE more for the first entry of each non-empty index (ready,
  delayed; the slots when only slotted jobs wait), a ZCOUNT when the first delayed job is due;
  when the topic's timing says a slot may have opened, the ZRANGEBYSCORE of open slots and what
  moving their ids costs (lib/slots.ts: migrate).
]]
${TOPIC_STATS_FN}
for i = 4, #ARGV do report(ARGV[i]) end
return out
`,
  parse: (reply) => rows(asArray(reply, "topicStats")),
});

export const listTopics = defineScript<{ topics: TopicRow[]; more: boolean; last: string }>({
  name: "listTopics",
  lua: `
--[[ listTopics: a page of topics by name, with the stats of those the scope allows.
  ARGV[4] the last name of the previous page, or ""   ARGV[5] page size (names read)
  ARGV[6] scope (lib/access.ts): the others are read past, their stats not computed
  ARGV[7..] the ranges to read, in order, each two ZRANGE BYLEX bounds (from, to), the first
  beginning after ARGV[4]: the whole index, or the names of a scope made of names and prefixes
  (src/domain/scope.ts: scopeRanges), so that no hidden name is read.
  Returns 1 if another page follows, else 0; the last name read ("" for none); then what
  topicStats returns for each topic allowed.
  Cost: ZRANGE BYLEX per range until the page (and one name more) is read, then topicStats's per
  topic allowed.
]]
${TOPIC_STATS_FN}
local size = tonumber(ARGV[5])
local names = {}
for i = 7, #ARGV - 1, 2 do
  if #names > size then break end
  local got = rcall("ZRANGE", key.topics, ARGV[i], ARGV[i + 1], "BYLEX", "LIMIT", 0, size + 1 - #names)
  for _, name in ipairs(got) do names[#names + 1] = name end
end
local last = math.min(#names, size)
out[1] = 0
if #names > size then out[1] = 1 end
out[2] = names[last] or ""
for i = 1, last do
  if allowed(names[i], ARGV[6]) then report(names[i]) end
end
return out
`,
  parse(reply) {
    const [more, last, ...flat] = asArray(reply, "listTopics");
    return { topics: rows(flat), more: Number(more) === 1, last: String(last ?? "") };
  },
});

export const cursorSecret = defineScript<string>({
  name: "cursorSecret",
  lua: `
--[[ cursorSecret: the deployment's key for sealing the cursors of topic pages (src/http/
  topic-cursors.ts), random, made by the first call and kept: no token or setting derives it.
  ARGV[4] a new random secret, stored when none is.   Returns the stored one.
  Cost: GET (+ SET the first time).
]]
local secret = rcall("GET", key.cursorSecret)
if secret then return secret end
rcall("SET", key.cursorSecret, ARGV[4])
return ARGV[4]
`,
  parse(reply) {
    if (typeof reply !== "string" || reply.length < 32) {
      throw new Error("The cursorSecret script answered no secret");
    }
    return reply;
  },
});

/** The config as stored after the change, and whether its push secret was generated now. */
export type ConfigureReply = { config: string; secretGenerated: boolean };

export const configure = defineScript<ConfigureReply>({
  name: "configure",
  lua: `
--[[ configure: sets a topic's config (defaults for new jobs, paused, push).
  ARGV[4] topic   ARGV[5] config JSON (validated)   ARGV[6] "put" (replace) or "patch" (the
  fields given replace the stored ones, JSON null removes one)   ARGV[7] a new random push
  secret, used when the config has a push without a secret and none was stored before.
  A push config registers the topic as pushed and makes its waiting jobs claimable now; without
  one the topic is pulled (jobs claimed before stay reserved until settled or their lease ends).
  Returns {config JSON as stored, 1 if the push secret was generated now else 0}.
  Cost: MGET (the topic's keys), SET (config), ZADD NX, INCR (seq: an unpaused topic wakes its
  long-polls); ZADD or ZREM to the push topics; when pushed, ZADD LT twice (claims, schedule).
]]
local topic, given, mode, candidate = ARGV[4], cjson.decode(ARGV[5]), ARGV[6], ARGV[7]
local old = config(topic)
local new = given
if mode == "patch" then
  new = config(topic)
  for field, value in pairs(given) do
    if value == cjson.null then new[field] = nil else new[field] = value end
  end
end
if new.push == cjson.null then new.push = nil end
local generated = 0
if type(new.push) == "table" then
  if new.push.secret == nil then
    if type(old.push) == "table" and old.push.secret then
      new.push.secret = old.push.secret
    else
      new.push.secret, generated = candidate, 1
    end
  end
  rcall("ZADD", key.pushTopics, 0, topic)
  pushed[topic] = true
  claimable(topic, NOW)
else
  rcall("ZREM", key.pushTopics, topic)
  rcall("ZREM", key.claims, topic)
end
local text = "{}"
if next(new) ~= nil then text = cjson.encode(new) end
rcall("SET", key.config(topic), text)
fields(topic).config = text
rcall("ZADD", key.topics, "NX", 0, topic)
bump(topic)
return {text, generated}
`,
  parse(reply) {
    const [config, generated] = asArray(reply, "configure");
    return { config: jsonText(config), secretGenerated: Number(generated) === 1 };
  },
});
