// Limits, and the value schemas the others build on: names, ids, durations, times, backoff.
import { z } from "zod";
import { WATCH_JOB_PREFIX } from "../redis/keys";

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

// The queue's defaults: DelayQueue's options (queue/options.ts), the service's environment
// (config.ts: DQ_DEFAULT_TTR, DQ_DEFAULT_MAX_ATTEMPTS, DQ_RETENTION_SECONDS, DQ_MAX_BODY_BYTES)
// and the API's descriptions all read them from here.
/** Time-to-run of a job whose topic sets none. */
export const DEFAULT_TTR_SECONDS = 60;
/** Attempts of a job whose topic sets none. */
export const DEFAULT_MAX_ATTEMPTS = 10;
/** How long finished and deleted records are kept. */
export const DEFAULT_RETENTION_SECONDS = 3600;
/** Largest job body, in bytes of JSON text (256 KiB). */
export const DEFAULT_MAX_BODY_BYTES = 256 * 1024;

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
  /**
   * WeChat Pay Native (QR) orders: the buyer pays within a minute of the scan or not at all, so
   * WeChat Pay advises querying every few seconds through the first minute: 5 s steps for 60 s,
   * then its back-end steps (30 s, 1 min, 3 min, 5 min, 10 min, 30 min).
   */
  "wechatpay-native": [5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 30, 60, 180, 300, 600, 1800],
  /**
   * Alipay face-to-face (当面付) orders: Alipay advises querying every 3-6 s for about a minute,
   * then cancelling: 4 s steps for 60 s, then backing off as WeChat Pay's back-end steps do.
   */
  "alipay-f2f": [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 30, 60, 180, 300, 600, 1800],
  /** Refunds, WeChat Pay's advice: 1 min after the refund, then 5, 10, 20 and 30 min (repeated). */
  refund: [60, 300, 600, 1200, 1800],
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
/**
 * The id a caller gives a job it adds: a JobId, but not one of delayq's own. Payment watches' poll
 * jobs and outcomes start with WATCH_JOB_PREFIX (redis/keys.ts), and watch ids are derived from
 * the order: a caller who took such an id first would swallow another's outcome.
 */
export const NewJobId = JobId.refine(
  (id) => !id.startsWith(WATCH_JOB_PREFIX),
  `must not start with "${WATCH_JOB_PREFIX}", which is delayq's own ` +
    "(payment watches' polls and outcomes)",
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
