// Recurring schedules (DESIGN §10): what PUT /v1/schedules/{name} takes and what a schedule reads
// as. Each fire is a job `{name}@{fire time, ms}` in the schedule's topic, due at the fire time.
import { z } from "zod";
import { WATCH_JOB_PREFIX } from "../redis/keys";
import {
  Attempts,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_TTR_SECONDS,
  TopicName,
  Ttr,
} from "./value-schemas";

/**
 * How far ahead of its time a fire is made, ms: each fire is added as a delayed job due at the
 * fire time, so it is on time whenever the once-a-minute tick runs. More than the tick's minute
 * (a late tick loses nothing), less than the slot lead (90 s: such a job waits in the delayed
 * zset, not a slot list).
 */
export const MAKE_AHEAD_MS = 80_000;

/** The most fires one schedule makes at once (a cron of every second makes 80). */
export const MAX_FIRES_AT_ONCE = 100;

/** The most schedules GET /v1/schedules answers in one page. */
export const MAX_SCHEDULE_PAGE = 1000;

/** A schedule's name: a topic name's rules, and not delayq's own job-id prefix. */
export const ScheduleName = TopicName.refine(
  (name) => !name.startsWith(WATCH_JOB_PREFIX),
  `must not start with "${WATCH_JOB_PREFIX}", which is delayq's own (payment watches)`,
).meta({
  description:
    "The schedule's name (a topic name's rules). Each fire is the job `{name}@{fire time, unix ms}`.",
  example: "daily-report",
});

export const CronExpression = z
  .string()
  .min(1)
  .max(200)
  .meta({
    description:
      "A cron expression of 5 fields (minute hour day-of-month month day-of-week), or 6 with " +
      "seconds first. Lists, ranges and steps as in Vixie cron (`*/5`, `1-5`, `MON-FRI`), `L` " +
      "and `#` as croner reads them. Daylight-saving changes are handled as cron does: a " +
      "fixed time in a skipped hour fires just after the gap, a fixed time in a repeated " +
      "hour fires once; interval jobs run in real time.",
    example: "*/5 * * * *",
  });

export const TimeZoneName = z.string().min(1).max(64).meta({
  description: 'The time zone the cron reads its fields in, an IANA name. Default "UTC".',
  example: "Asia/Shanghai",
});

export const ScheduleInput = z
  .strictObject({
    cron: CronExpression,
    timezone: TimeZoneName.optional(),
    topic: TopicName.meta({
      description: "The topic each fire's job goes to (a pull or a push topic).",
      example: "reports",
    }),
    body: z
      .unknown()
      .optional()
      .meta({
        description: "The body of each fire's job, any JSON value. Default null.",
        example: { report: "daily" },
      }),
    ttr: Ttr.optional().meta({
      description: `Each fire's time to run, seconds. Default: the topic's, else \`DQ_DEFAULT_TTR\` (${DEFAULT_TTR_SECONDS}).`,
      example: 60,
    }),
    maxAttempts: Attempts.optional().meta({
      description: `Each fire's reservations before it dies. Default: the topic's, else \`DQ_DEFAULT_MAX_ATTEMPTS\` (${DEFAULT_MAX_ATTEMPTS}).`,
      example: 5,
    }),
    paused: z
      .boolean()
      .optional()
      .meta({
        description:
          "A paused schedule makes no fire (its fires made ahead and not yet due are taken back); " +
          "put it again with `paused: false` to go on from the next fire.",
        example: false,
      }),
  })
  .meta({ id: "ScheduleInput" });

export type ScheduleInput = z.infer<typeof ScheduleInput>;

export const Schedule = z
  .object({
    name: z.string().meta({ description: "The schedule's name.", example: "daily-report" }),
    cron: z.string().meta({ description: "Its cron expression, as put.", example: "0 8 * * *" }),
    timezone: z
      .string()
      .meta({ description: "The time zone its cron is read in.", example: "Asia/Shanghai" }),
    topic: z.string().meta({ description: "The topic its fires go to.", example: "reports" }),
    body: z.unknown().meta({
      description: "Each fire's body, the JSON text it was put with.",
      example: { report: "daily" },
    }),
    ttr: z
      .number()
      .optional()
      .meta({ description: "Each fire's ttr, seconds, when given.", example: 60 }),
    maxAttempts: z
      .number()
      .optional()
      .meta({ description: "Each fire's max attempts, when given.", example: 5 }),
    paused: z
      .boolean()
      .meta({ description: "Whether it is paused (makes no fire).", example: false }),
    nextRunAt: z.number().nullable().meta({
      description: "When the next fire is due, unix ms; null while paused.",
      example: 1_800_000_000_000,
    }),
    lastRunAt: z.number().optional().meta({
      description: "When the last fire made was due, unix ms (absent before the first fire).",
      example: 1_799_913_600_000,
    }),
    createdAt: z
      .number()
      .meta({ description: "When it was first put, unix ms.", example: 1_799_900_000_000 }),
  })
  .meta({
    id: "Schedule",
    description: "A recurring schedule, with its next and last fire times.",
    example: {
      name: "daily-report",
      cron: "0 8 * * *",
      timezone: "Asia/Shanghai",
      topic: "reports",
      body: { report: "daily" },
      paused: false,
      nextRunAt: 1_800_000_000_000,
      lastRunAt: 1_799_913_600_000,
      createdAt: 1_799_900_000_000,
    },
  });

export type Schedule = {
  name: string;
  cron: string;
  timezone: string;
  topic: string;
  body: unknown;
  ttr?: number;
  maxAttempts?: number;
  paused: boolean;
  nextRunAt: number | null;
  lastRunAt?: number;
  createdAt: number;
};
