// zod schemas for jobs, topic config and every operation's input; the types derive from them.
import { z } from "zod";
import { PushConfig } from "./push";

/** One year: the longest delay, like QStash's paid plans. */
export const MAX_DELAY_SECONDS = 365 * 24 * 3600;
/** The longest time-to-run: one day. */
export const MAX_TTR_SECONDS = 24 * 3600;
export const MAX_ATTEMPTS = 1000;
export const MAX_BATCH = 1000;
export const MAX_POP = 100;
/** Jobs one kick, list page or dead-letter purge handles in one script call. */
export const MAX_PAGE = 1000;
/**
 * Largest unix-ms timestamp accepted (year 5138): 14 digits, so that Lua's number formatting
 * (%.14g, in cjson and in command arguments) keeps every millisecond exact.
 */
export const MAX_TIMESTAMP = 99_999_999_999_999;

/**
 * Named retry schedules, in seconds. Each is the list of waits between attempts; past its end the
 * last step repeats until `maxAttempts` or `deadline` stops the job.
 */
export const BACKOFF_SCHEDULES = {
  /** WeChat Pay's advice for back-end order polling. */
  wechatpay: [5, 30, 60, 180, 300, 600, 1800],
  /** Alipay's notification resend cadence. */
  alipay: [240, 600, 600, 3600, 7200, 21600, 54000],
  /** A Youzan-style queue's retry array, modelled on Alipay. */
  youzan: [0, 0, 120, 600, 600, 3600, 7200, 21600, 54000],
} as const;

export type ScheduleName = keyof typeof BACKOFF_SCHEDULES;

// "." and ".." are refused: in a URL path they would be resolved away ("/v1/topics/./jobs").
// Names starting with "__" are delayq's own (its payment polls live in "__payments").
export const TopicName = z
  .string()
  .regex(
    /^(?!\.\.?$)(?!__)[A-Za-z0-9_.:-]{1,100}$/,
    'must be 1-100 characters of A-Z a-z 0-9 _ . : - (not "." or "..", and not starting with "__", which is delayq\'s own)',
  );
export const JobId = z
  .string()
  .regex(
    /^(?!\.\.?$)[A-Za-z0-9_.:@~+=-]{1,128}$/,
    'must be 1-128 characters of A-Z a-z 0-9 _ . : @ ~ + = - (and not "." or "..")',
  );
export const Receipt = z.string().min(1).max(100);

/** Seconds, fractions allowed (rounded to the millisecond). */
export const Seconds = z.number().min(0).max(MAX_DELAY_SECONDS);
export const Ttr = z.number().int().min(1).max(MAX_TTR_SECONDS);
export const Attempts = z.number().int().min(1).max(MAX_ATTEMPTS);

/** The smallest number taken as unix milliseconds: below it, a time can only be in seconds. */
const MIN_TIMESTAMP_MS = 100_000_000_000;

/**
 * Unix milliseconds, or an ISO-8601 date-time with a zone; parsed to unix ms. A number below
 * 10^11 (before March 1973 in ms, but a date up to the year 5138 in seconds) is refused: it is
 * seconds given where milliseconds are wanted (issue 8.16).
 */
export const Timestamp = z.union(
  [
    z
      .number()
      .int()
      .min(MIN_TIMESTAMP_MS, {
        error: (issue) =>
          typeof issue.input === "number" && issue.input >= 0
            ? `must be unix milliseconds, and ${issue.input} looks like seconds: multiply by 1000`
            : "must be unix milliseconds (e.g. 1800000000000)",
      })
      .max(MAX_TIMESTAMP),
    z.iso.datetime({ offset: true }).transform((text) => Date.parse(text)),
  ],
  {
    error: () =>
      "must be unix milliseconds (e.g. 1800000000000) or an ISO-8601 date-time with a zone " +
      '(e.g. "2027-01-15T08:00:00+08:00")',
  },
);

export const ExponentialBackoff = z.strictObject({
  type: z.literal("exponential").meta({ description: "Selects the exponential policy." }),
  /** The first wait, in seconds. */
  delay: Seconds.refine((s) => s > 0, "must be greater than 0").meta({
    description: "The first wait, seconds (> 0).",
    example: 10,
  }),
  /** @default 2 */
  factor: z
    .number()
    .min(1)
    .max(10)
    .default(2)
    .meta({ description: "Each wait is the previous one times this.", example: 2 }),
  /** The longest wait, in seconds. @default one year */
  max: Seconds.optional().meta({
    description: "The longest wait, seconds (default one year).",
    example: 3600,
  }),
});

/**
 * How long a job waits after a failed attempt: a fixed number of seconds, a list of steps (the
 * last repeats), a named schedule, or an exponential policy.
 */
export const Backoff = z.union(
  [
    Seconds,
    z.array(Seconds).min(1).max(100),
    z.enum(Object.keys(BACKOFF_SCHEDULES) as [ScheduleName, ...ScheduleName[]]),
    ExponentialBackoff,
  ],
  {
    error: () =>
      `must be seconds (e.g. 30, up to ${MAX_DELAY_SECONDS}), a list of 1-100 steps in seconds ` +
      `(e.g. [5, 30, 60]), a named schedule (${Object.keys(BACKOFF_SCHEDULES).join(", ")}), or ` +
      '{"type": "exponential", "delay": seconds > 0, "factor"?: 1-10, "max"?: seconds}',
  },
);
export type Backoff = z.output<typeof Backoff>;

export const JobDefaults = z.strictObject({
  ttr: Ttr.optional().meta({
    description: "Time to run of the topic's new jobs, seconds (else `DQ_DEFAULT_TTR`, 60).",
    example: 30,
  }),
  maxAttempts: Attempts.optional().meta({
    description: "Attempts of the topic's new jobs (else `DQ_DEFAULT_MAX_ATTEMPTS`, 10).",
    example: 8,
  }),
  backoff: Backoff.optional().meta({
    description: "Backoff of the topic's new jobs (else none: ready again at once).",
    example: "alipay",
  }),
});
export type JobDefaults = z.output<typeof JobDefaults>;

export const TopicConfig = JobDefaults.extend({
  /** A paused topic hands out nothing; jobs still become due and wait. */
  paused: z.boolean().optional().meta({
    description: "A paused topic hands out nothing; its jobs still become due and wait.",
    example: false,
  }),
  push: PushConfig.nullable()
    .optional()
    .meta({
      description:
        "Deliver due jobs to a webhook instead of waiting for pop (see Push topics); null: pulled.",
      example: { url: "https://shop.example/hooks/delayq", via: "direct", timeout: 15 },
    }),
});
export type TopicConfig = z.output<typeof TopicConfig>;

/**
 * A partial change of a topic's config (PATCH): the fields given replace the stored ones, a
 * field set to null is removed, the others are kept.
 */
export const TopicConfigPatch = z.strictObject({
  ttr: Ttr.nullable()
    .optional()
    .meta({ description: "Default time to run, seconds; null removes it.", example: 30 }),
  maxAttempts: Attempts.nullable()
    .optional()
    .meta({ description: "Default reservations before a job dies; null removes it.", example: 8 }),
  backoff: Backoff.nullable().optional().meta({
    description: "Default wait after a failed attempt; null removes it.",
    example: "wechatpay",
  }),
  paused: z
    .boolean()
    .nullable()
    .optional()
    .meta({ description: "Pause (true) or resume (false or null) the topic.", example: true }),
  push: PushConfig.nullable()
    .optional()
    .meta({
      description: "The push config (whole); null makes the topic pulled again.",
      example: { url: "https://shop.example/hooks/delayq", timeout: 15 },
    }),
});
export type TopicConfigPatch = z.output<typeof TopicConfigPatch>;

/** The fields of an add, shared by `POST /v1/jobs` and the command protocol's `add`. */
export const AddJobFields = {
  topic: TopicName.meta({
    description: "The topic: a group of jobs of one kind, consumed together.",
    example: "payments",
  }),
  id: JobId.optional().meta({
    description:
      "Your id, unique in the deployment; adding it again returns the stored job. Made by the " +
      "server when absent (give one if you may retry the add).",
    example: "order-1042",
  }),
  /** Any JSON value, stored as its JSON text and returned as such. */
  body: z
    .unknown()
    .optional()
    .meta({
      description:
        "Any JSON value, up to `DQ_MAX_BODY_BYTES` (256 KiB); returned byte for byte as sent.",
      example: { order: "1042", provider: "wechatpay" },
    }),
  delay: Seconds.optional().meta({
    description: "Seconds from now until the job is due (fractions allowed). Default 0: due now.",
    example: 30,
  }),
  runAt: Timestamp.optional().meta({
    description: "When the job is due: unix ms or ISO-8601 with a zone. Excludes `delay`.",
    example: "2027-01-15T08:00:00+08:00",
  }),
  ttr: Ttr.optional().meta({
    description:
      "Time to run, seconds: how long a consumer holds the job after pop before it comes back. " +
      "Default: the topic's, else `DQ_DEFAULT_TTR` (60).",
    example: 60,
  }),
  maxAttempts: Attempts.optional().meta({
    description:
      "Reservations allowed before the job dies. Default: the topic's, else " +
      "`DQ_DEFAULT_MAX_ATTEMPTS` (10).",
    example: 8,
  }),
  backoff: Backoff.optional().meta({
    description:
      "The wait after a failed attempt: seconds, a list of steps in seconds (the last repeats), " +
      'a named schedule, or `{"type": "exponential", "delay", "factor", "max"}`. Default: the ' +
      "topic's, else none (ready again at once).",
    example: "wechatpay",
  }),
  deadline: Timestamp.optional().meta({
    description:
      "Unix ms or ISO-8601: past it the job dies instead of being retried or handed out.",
    example: 1800000600000,
  }),
  replace: z
    .boolean()
    .optional()
    .meta({
      description:
        "Overwrite a job with this id that is not reserved. Default false: adding it again " +
        "returns the stored job unchanged.",
    }),
};

/** `delay` and `runAt` exclude each other. */
export function oneDueTime(job: { delay?: number; runAt?: number }): boolean {
  return job.delay === undefined || job.runAt === undefined;
}
export const ONE_DUE_TIME = { message: "give either delay or runAt, not both", path: ["runAt"] };

export const AddJobInput = z.strictObject(AddJobFields).refine(oneDueTime, ONE_DUE_TIME);
export type AddJobInput = z.input<typeof AddJobInput>;

/** The longest long-poll, in seconds. */
export const MAX_WAIT_SECONDS = 20;

export const PopInput = z.strictObject({
  count: z
    .number()
    .int()
    .min(1)
    .max(MAX_POP)
    .default(1)
    .meta({ description: "The most jobs to reserve.", example: 10 }),
  /** Seconds to wait for a job when none is ready (long-poll). */
  wait: z.number().min(0).max(MAX_WAIT_SECONDS).default(0).meta({
    description: "Seconds to wait for a job when none is ready (long-poll).",
    example: 20,
  }),
});

const RECEIPT_FIELD = Receipt.optional().meta({
  description:
    "The receipt pop gave; a receipt of an ended reservation is refused (`stale_receipt`). " +
    "Without one the call acts for whoever holds the job.",
  example: "4f1c2a9be07d.0",
});
export const ReceiptInput = z.strictObject({ receipt: RECEIPT_FIELD });
export const ReleaseInput = z.strictObject({
  receipt: RECEIPT_FIELD,
  delay: Seconds.optional().meta({
    description: "Seconds until the job is due again. Default: its backoff step.",
    example: 30,
  }),
});

export const KickInput = z
  .strictObject({
    ids: z
      .array(JobId)
      .min(1)
      .max(MAX_PAGE)
      .optional()
      .meta({ description: "The dead jobs to kick. Excludes `count`.", example: ["order-1042"] }),
    count: z.number().int().min(1).max(MAX_PAGE).optional().meta({
      description: "Kick this many of the oldest dead jobs. Excludes `ids`.",
      example: 100,
    }),
  })
  .refine((kick) => kick.ids === undefined || kick.count === undefined, {
    message: "give either ids or count, not both",
    path: ["count"],
  });

export const JobState = z.enum(["delayed", "ready", "reserved", "finished", "dead", "deleted"]);
export type JobState = z.output<typeof JobState>;
/** The states a topic indexes, and so the ones that can be listed. */
export const ListableState = z.enum(["delayed", "ready", "reserved", "dead"]);
export type ListableState = z.output<typeof ListableState>;

export const ListInput = z
  .strictObject({
    state: ListableState,
    cursor: z
      .string()
      // `z<score>:<id>` resumes a state's sorted set after that entry; `s<slot>:<offset>`
      // resumes delayed jobs in the slot lists (src/redis/lua/scripts/list.ts).
      .regex(
        /^(z\d{1,16}:[A-Za-z0-9_.:@~+=-]{0,128}|s\d{1,16}:\d{1,9})$/,
        "must be the cursor of a previous page, as it was returned",
      )
      .optional(),
    limit: z.number().int().min(1).max(MAX_PAGE).default(100),
  })
  .refine((input) => !input.cursor?.startsWith("s") || input.state === "delayed", {
    message: "this cursor pages through delayed jobs: pass it with state=delayed",
    path: ["cursor"],
  });

export const Job = z.object({
  id: z.string().meta({ description: "The job's id." }),
  topic: z.string().meta({ description: "The job's topic." }),
  state: JobState.meta({ description: "Where the job is in its life." }),
  body: z.unknown().meta({ description: "The body, the JSON text it was added with." }),
  /** When the job is (or was) due, unix ms. */
  dueAt: z.number().meta({ description: "When the job is (or was) due, unix ms." }),
  /** Time-to-run, seconds. */
  ttr: z.number().meta({ description: "Time to run, seconds." }),
  /** Reservations so far. */
  attempts: z.number().meta({ description: "Reservations so far (pops, counting this one)." }),
  maxAttempts: z.number().meta({ description: "Reservations allowed before the job dies." }),
  backoff: Backoff.optional().meta({ description: "The wait after a failed attempt, if any." }),
  deadline: z
    .number()
    .optional()
    .meta({ description: "Past this the job dies, unix ms.", example: 1800086400000 }),
  createdAt: z.number().meta({ description: "When the job was added, unix ms." }),
  /** End of the current reservation, unix ms (reserved jobs only). */
  reservedUntil: z
    .number()
    .optional()
    .meta({ description: "End of the current reservation, unix ms (reserved jobs only)." }),
  /** The current reservation's receipt (reserved and finished jobs). */
  receipt: z
    .string()
    .optional()
    .meta({ description: "The current reservation's receipt (reserved and finished jobs)." }),
  /** When the job finished, died or was deleted, unix ms. */
  endedAt: z.number().optional().meta({
    description: "When the job finished, died or was deleted, unix ms.",
    example: 1800000095000,
  }),
  /** Why a dead job died. */
  deadReason: z
    .enum(["attempts", "deadline", "buried"])
    .optional()
    .meta({ description: "Why a dead job died: attempts used up, past its deadline, or buried." }),
  lastDelivery: z
    .object({
      status: z.number().meta({ description: "HTTP status the receiver answered; 0: no answer." }),
      at: z.number().meta({ description: "When the attempt ended, unix ms." }),
      error: z.string().optional().meta({ description: "Why it failed, when it did." }),
    })
    .optional()
    .meta({
      description: "Push topics: the last delivery attempt.",
      example: { status: 503, at: 1800000095000, error: "HTTP 503" },
    }),
});
export type Job = z.output<typeof Job>;

export const TopicStats = z.object({
  topic: z.string().meta({ description: "The topic's name." }),
  counts: z
    .object({
      delayed: z.number().meta({ description: "Jobs waiting for their due time." }),
      ready: z.number().meta({ description: "Jobs due, waiting for a consumer." }),
      reserved: z.number().meta({ description: "Jobs a consumer holds (popped, not finished)." }),
      dead: z.number().meta({ description: "Jobs in the dead letter." }),
    })
    .meta({ description: "Jobs per state." }),
  /** The earliest due time among waiting jobs, unix ms; absent when none wait. */
  oldestDueAt: z.number().optional().meta({
    description: "The earliest due time among waiting jobs, unix ms; absent when none wait.",
  }),
  config: TopicConfig.meta({ description: "The topic's config: job defaults, pause, push." }),
  push: z
    .object({
      delivered: z.number().meta({
        description: "Deliveries the receiver answered (done, retry, bury).",
        example: 120,
      }),
      failed: z.number().meta({
        description: "Delivery attempts that failed (error status, timeout, no answer).",
        example: 2,
      }),
    })
    .optional()
    .meta({
      description: "Push topics: delivery counts since the topic was created.",
      example: { delivered: 120, failed: 2 },
    }),
});
export type TopicStats = z.output<typeof TopicStats>;
