// Every Redis key delayq uses, built in one place for TypeScript and for the Lua scripts alike.

/**
 * The keyspace. All keys share one Redis Cluster hash tag, `{<prefix>}`, so every multi-key
 * script runs in one slot. Per-topic keys embed the topic; the job record key embeds the id
 * (ids are unique per deployment, so one id cannot live in two topics).
 */
export const KEY_LAYOUT = {
  /** string: the job record, `<meta>\n<body JSON>` (format in record.ts). */
  job: "j:<id>",
  /** zset: waiting jobs not yet due, scored by due time (ms): the delay bucket. */
  delayed: "t:<topic>:delayed",
  /**
   * zset: the topic's slot lists (below) by start time (ms); member and score are the start.
   * Jobs due so far ahead that their one-minute slot starts more than 90 s from now wait in the
   * list `t:<topic>:slots:<start>` (ids, in the order they came) instead of the delayed zset: a
   * list entry costs ~15 bytes where a sorted-set entry costs ~100 (lua/lib/slots.ts).
   */
  slots: "t:<topic>:slots",
  /** integer: how many live jobs of the topic wait in slot lists (their ids, not yet moved). */
  slotted: "t:<topic>:slotted",
  /** zset: jobs consumers may take now, scored by due time (ms): the ready list. */
  ready: "t:<topic>:ready",
  /** zset: reserved jobs, scored by the end of their lease (ms). */
  reserved: "t:<topic>:reserved",
  /** zset: dead jobs, scored by when they died (ms). */
  dead: "t:<topic>:dead",
  /**
   * A topic's own fields live in four strings, so that pop reads them in the same MGET as the
   * records it popped (lib/topic.ts). string: the topic's config (JSON); absent for none.
   */
  config: "t:<topic>:config",
  /**
   * string: `<next>|<lease>|<slot>`, ms, "-" for none and "" for not known. `next` is a lower
   * bound of the earliest time something of the topic needs looking at (a delayed job's due time,
   * a lease's end, a slot's opening): pop does its upkeep only once it has passed, and the
   * schedule's entry for the topic is never later than it. `lease` and `slot` are lower bounds
   * of the first lease end and the first slot opening, so that pop's upkeep reads those indexes
   * only when their time has come.
   */
  timing: "t:<topic>:timing",
  /** string: until when a long-polling caller may be waiting for the topic, ms. */
  waiting: "t:<topic>:waiting",
  /**
   * integer: the topic's change counter, bumped whenever jobs may be available sooner while a
   * caller long-polls it (the long-poll signal), and on the topic's first write.
   */
  seq: "t:<topic>:seq",
  /**
   * hash: the same fields (config, next, lease, slot, waiting, seq) as earlier versions kept them,
   * in one hash. A script that finds none of a topic's four strings moves this hash's fields into
   * them (lib/topic.ts: adopt), so that topics written by an earlier version carry on.
   */
  legacyMeta: "t:<topic>:meta",
  /** zset: topics with something timed, scored by the earliest time the scheduler must look. */
  schedule: "schedule",
  /** zset: every topic ever used or configured (score 0, listed by name). */
  topics: "topics",
  /**
   * string: a push topic with `rate`: the first send time (ms) its next claimed job may have; each
   * claimed job takes the later of its due time and this, and moves it on by the spacing. Expires
   * once that time has passed (scripts/push.ts: claim).
   */
  flowSlot: "t:<topic>:flow",
  /** hash: counters of a push topic's deliveries (delivered, failed). */
  stats: "t:<topic>:stats",
  /** zset: the push topics (score 0, by name). */
  pushTopics: "push:topics",
  /**
   * zset: push topics with waiting jobs, scored by the earliest time one of them may need
   * claiming (a lower bound). The schedule holds the sentinel SCHEDULE_MARKERS.push at that time
   * minus the claim lookahead, so that an idle tick finds push work without a command of its own.
   */
  claims: "push:claims",
  /**
   * list: the topic's push jobs that died, whose failureUrl is still to be told, as `<ms when
   * queued>|<id>`.
   */
  topicNotices: "t:<topic>:notices",
  /**
   * list: the topic's notices whose sending failed, as `<ms when due>|<ms of the first
   * failure>|<id>`, each due a minute after its last try, until NOTICE_RETRY_MS has passed since
   * its first failure (scripts/push.ts: notices).
   */
  topicNoticeRetries: "t:<topic>:notices:retry",
  /**
   * zset: topics with failure notices waiting, scored by when their next turn comes: when a
   * notice was queued or the topic was last served, or its first retry's time. Each round serves
   * the longest waiting first and shares its room among them, so one tenant's mass of deaths or
   * failing receiver does not hold back another's notices.
   */
  noticing: "push:noticing",
  /**
   * integer: how many push jobs the fresh runs asked for by hand-offs (scripts/push.ts: handOff)
   * are still to take; each such run's first claim takes its share off. It expires a while after
   * the last ask, so a run that never came is forgotten.
   */
  handOffs: "push:handoffs",
  /**
   * hash: per wave (a field: the wave's number, its start / HAND_OFF_WAVE_MS), how many push jobs
   * due in that wave the runs asked for by hand-offs are still to take (scripts/push.ts: handOff);
   * each such run's first claim takes its share off its wave's field. Waves already begun are
   * dropped by the next ask; the hash expires a while after the last ask.
   */
  handOffWaves: "push:handoffs:waves",
  /**
   * list and list: where earlier versions kept every topic's notices and retries in one queue
   * (ids; `<due>|<first failure>|<id>`). The notices script moves what it finds there into the
   * topics' own lists, a round's room at a time.
   */
  legacyNotices: "push:notices",
  legacyNoticeRetries: "push:notices:retry",
  /** string: the deployment's random key for sealing topic cursors (scripts/topics.ts). */
  cursorSecret: "secret:cursors",
  /**
   * hash: a payment watch (its fields: WATCH_FIELDS, scripts/payments.ts); its polls are a job of
   * the internal topic \`__payments\` with the id WATCH_JOB_PREFIX + watch id (below).
   */
  watch: "pay:<id>",
  /** zset: payment watches (their ids) by when they started, ms, for the dashboard's listing. */
  watches: "watches",
  /** string: how far the sweep of `watches` has come (a start time, ms); see watchStart. */
  watchSweep: "watches:sweep",
  /**
   * zset: refund watches (their ids; each a `watch` hash of its own, polled in the internal topic
   * `__refunds`) by when they started, ms, for the dashboard's listing.
   */
  refunds: "refunds",
  /** string: how far the sweep of `refunds` has come (a start time, ms); see watchStart. */
  refundSweep: "refunds:sweep",
  /**
   * integer: how many watches (payments and refunds together) started by a token's requests are
   * polling, the token known by its id (http/auth.ts: TokenSet, a labelled SHA-256, never the
   * token). watchStart counts a watch in and refuses one over DQ_MAX_WATCHES_PER_TOKEN;
   * watchPolled (an outcome) and watchStop count it out; absent at zero.
   */
  tokenWatches: "tok:<id>:watches",
  /**
   * string: a dashboard session, keyed by the SHA-256 (hex) of its id, so that the keyspace gives
   * no cookie away; its value `token:<token id>` (http/auth.ts: tokenIdOf). Expires with the
   * session (DQ_DASHBOARD_SESSION_S); sign-out deletes it (scripts/sessions.ts).
   */
  session: "session:<digest>",
  /**
   * string: a recurring schedule, `<state JSON>\n<spec JSON>\n<body JSON>` (scripts/schedules.ts):
   * its state (next fire to make, fires made ahead, last fire, createdAt), its spec as put (cron,
   * timezone, topic, ttr, maxAttempts, paused) and each fire's body.
   */
  scheduleRecord: "sched:<name>",
  /** zset: every schedule's name (score 0), for listing by name. */
  scheduleNames: "scheds",
  /**
   * zset: the schedules that are not paused, scored by when their next fires must be made (the
   * next fire's time less MAKE_AHEAD_MS). The schedule holds SCHEDULE_MARKERS.schedules at the
   * lowest score, so that an idle tick finds schedules to make without a command of its own.
   */
  schedulesDue: "scheds:due",
  /**
   * string: on a partitioned deployment (partitions.ts), where a job lives whose topic is another
   * partition's than its id's: that partition's number. Kept in the id's partition; absent when
   * the job lives there (scripts/partitions.ts: idClaim). Expires with the job's record.
   */
  jobIndex: "i:<id>",
  /**
   * list: jobs a script of this partition wrote for another partition's topic (a payment's
   * outcome, a schedule's fire), or an index entry it needs, as JSON; the service adds them there
   * right after the script, and the tick finishes what a crashed caller left (lib/jobs.ts).
   */
  outbox: "outbox",
  /** list: ids of jobs of this partition that ended, whose index entries are to expire too. */
  ended: "ended",
  /**
   * string: how many partitions the deployment's keys are spread over, in home, written by the
   * first start with more than one (scripts/partitions.ts: layoutMark); absent for one.
   */
  layout: "layout",
} as const;

export type KeyName = keyof typeof KEY_LAYOUT;

/**
 * The schedule's members that are not topics (no topic name holds "~"): each says that work other
 * than a topic's is due then, and the tick reports it instead of visiting it. `push`: push jobs
 * need claiming (claims, above; lib/transitions.ts: claimable); `notices`: failure notices wait to
 * be sent (scripts/push.ts: notices); `schedules`: recurring schedules' next fires are to be made
 * (scripts/schedules.ts). The scripts interpolate them.
 */
export const SCHEDULE_MARKERS = {
  push: "~push",
  notices: "~notices",
  schedules: "~schedules",
  /**
   * A partitioned deployment's upkeep (redis/routing.ts): `ended`, ids of ended jobs whose index
   * entries live in other partitions wait (key.ended); `outbox`, jobs for other partitions wait
   * in home's outbox (key.outbox). Set when the list gets its first entry, removed when emptied.
   */
  ended: "~ended",
  outbox: "~outbox",
} as const;

/**
 * Job ids of delayq's own start with this: a payment watch's poll job is `pay:<watch id>` (in the
 * internal topic `__payments`; a refund watch's in `__refunds`), its outcome `pay:<watch id>:<n>`
 * in each notify topic. Callers may
 * not add such ids (domain/value-schemas.ts: NewJobId). The scripts (scripts/payments.ts) read it
 * too, interpolated.
 */
export const WATCH_JOB_PREFIX = "pay:";

/** The id of a watch's poll job. */
export function watchJobId(watchId: string): string {
  return WATCH_JOB_PREFIX + watchId;
}

/** The watch a poll job polls for, from the job's id (one that watchJobId made). */
export function watchIdOfJob(jobId: string): string {
  return jobId.slice(WATCH_JOB_PREFIX.length);
}

/** The key base for a prefix: the prefix as a hash tag, then a colon. */
export function keyBase(prefix: string): string {
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(prefix)) {
    throw new Error(`Invalid key prefix "${prefix}": use 1-64 characters of A-Z a-z 0-9 _ . : -`);
  }
  return `{${prefix}}:`;
}

type Builders = {
  [K in KeyName]: (typeof KEY_LAYOUT)[K] extends `${string}<${string}>${string}`
    ? (arg: string) => string
    : string;
};

/** Key builders for TypeScript (tests, tools). Scripts get the same shapes from `LUA_KEYS`. */
export function keys(prefix: string): Builders & { base: string } {
  const base = keyBase(prefix);
  const built: Record<string, unknown> = { base };
  for (const [name, layout] of Object.entries(KEY_LAYOUT)) {
    built[name] = layout.includes("<")
      ? (arg: string) => base + layout.replace(/<\w+>/, () => arg)
      : base + layout;
  }
  return built as Builders & { base: string };
}

export type Keys = ReturnType<typeof keys>;

/** Lua: `key.<name>(arg)` for every key, built from KEY_LAYOUT against the base in `P`. */
export const LUA_KEYS = [
  "local key = {}",
  ...Object.entries(KEY_LAYOUT).map(([name, layout]) => {
    const match = /<(\w+)>/.exec(layout);
    if (!match) return `key.${name} = P .. "${layout}"`;
    const [before, after] = layout.split(match[0]) as [string, string];
    return `key.${name} = function(x) return P .. "${before}" .. x .. "${after}" end`;
  }),
].join("\n");
