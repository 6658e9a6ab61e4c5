// tick: the scheduler's work for one slice.
import type { TickSlice } from "../../../domain/results";
import { SCHEDULE_MARKERS } from "../../keys";
import { asArray, defineScript } from "../script";

/**
 * The tick's answer: its slice, and (for redis/routing.ts) whether a partitioned deployment's
 * upkeep waits in this partition.
 */
export type TickReply = TickSlice & { upkeep: { ended: boolean; outbox: boolean } };

export const tick = defineScript<TickReply>({
  name: "tick",
  lua: `
--[[ tick: the scheduler's work for one slice: for each topic whose next event is due, move the
  ids of its open slots, promote its due jobs and take back its expired reservations, then set
  when to look at it next.
  ARGV[4] most jobs to move in this call (≤ 1000)   ARGV[5] most topics to visit
  The schedule's \`${SCHEDULE_MARKERS.push}\` entry is not a topic: it says push jobs need claiming soon
  (lib/transitions.ts: claimable); it is reported, and left for the claim script. So is
  \`${SCHEDULE_MARKERS.notices}\` (failure notices to send; scripts/push.ts: notices), and
  \`${SCHEDULE_MARKERS.schedules}\` (schedules' fires to make; scripts/schedules.ts).
  Returns {promoted, expired, died, topics visited, 1 if more is due now else 0, 1 if push
  jobs need claiming else 0, 1 if failure notices wait else 0, 1 if schedules' fires are to be
  made else 0, then a partitioned deployment's upkeep: 1 if ended jobs' ids wait in key.ended
  (\`${SCHEDULE_MARKERS.ended}\`) else 0, 1 if home's outbox holds jobs (\`${SCHEDULE_MARKERS.outbox}\`) else 0}.
  Cost when idle: this EVALSHA and one ZRANGE, whatever the number of topics (with more due
  than this call does: a ZSCORE each for \`${SCHEDULE_MARKERS.push}\`, \`${SCHEDULE_MARKERS.notices}\` and \`${SCHEDULE_MARKERS.schedules}\` not met on the
  page). Per topic
  visited: MGET (its keys), migrate, promote and expire, three ZRANGEs for the next event, and
  SET (timing) + ZADD (or ZREM) to set it.
]]
local budget, maxTopics = tonumber(ARGV[4]), tonumber(ARGV[5])
local topics = rcall("ZRANGE", key.schedule, "-inf", NOW, "BYSCORE", "LIMIT", 0, maxTopics)
if #topics == 0 then return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0} end
local promoted, expired, died, more, pushDue, visited, noticesDue = 0, 0, 0, 0, 0, 0, 0
local schedulesDue, endedDue, outboxDue = 0, 0, 0
if #topics == maxTopics then more = 1 end

local function visit(topic)
  visited = visited + 1
  local taken, bound = migrate(topic, budget)
  budget = budget - taken
  if budget > 0 then
    local moved = promote(topic, budget, bound)
    promoted, budget = promoted + moved, budget - moved
  end
  if budget > 0 then
    local back, dead = expire(topic, budget)
    expired, died, budget = expired + back, died + dead, budget - back
  end
  local nextAt, lease, slot = nextEvent(topic)
  setNext(topic, nextAt, lease, slot)
  if nextAt >= 0 and nextAt <= NOW then more = 1 end
end

for _, topic in ipairs(topics) do
  if topic == "${SCHEDULE_MARKERS.push}" then
    pushDue = 1
  elseif topic == "${SCHEDULE_MARKERS.notices}" then
    noticesDue = 1
  elseif topic == "${SCHEDULE_MARKERS.schedules}" then
    schedulesDue = 1
  elseif topic == "${SCHEDULE_MARKERS.ended}" then
    endedDue = 1
  elseif topic == "${SCHEDULE_MARKERS.outbox}" then
    outboxDue = 1
  elseif budget <= 0 then
    more = 1
  else
    visit(topic)
  end
end
-- A backlog (a full page of due topics) must not hide that push jobs or notices are due too:
-- their entries may sort after the page. Only then looked up, so an idle tick stays 2 commands.
if more == 1 then
  local function due(entry)
    local at = rcall("ZSCORE", key.schedule, entry)
    return at and tonumber(at) <= NOW
  end
  if pushDue == 0 and due("${SCHEDULE_MARKERS.push}") then pushDue = 1 end
  if noticesDue == 0 and due("${SCHEDULE_MARKERS.notices}") then noticesDue = 1 end
  if schedulesDue == 0 and due("${SCHEDULE_MARKERS.schedules}") then schedulesDue = 1 end
  if PARTS > 1 then
    if endedDue == 0 and due("${SCHEDULE_MARKERS.ended}") then endedDue = 1 end
    if outboxDue == 0 and due("${SCHEDULE_MARKERS.outbox}") then outboxDue = 1 end
  end
end
return {promoted, expired, died, visited, more, pushDue, noticesDue, schedulesDue, endedDue,
  outboxDue}
`,
  parse(reply) {
    const [
      promoted,
      expired,
      died,
      topics,
      more,
      pushDue,
      noticesDue,
      schedulesDue,
      ended,
      outbox,
    ] = asArray(reply, "tick").map(Number);
    return {
      promoted: promoted ?? 0,
      expired: expired ?? 0,
      died: died ?? 0,
      topics: topics ?? 0,
      more: more === 1,
      pushDue: pushDue === 1,
      noticesDue: noticesDue === 1,
      schedulesDue: schedulesDue === 1,
      upkeep: { ended: ended === 1, outbox: outbox === 1 },
    };
  },
});
