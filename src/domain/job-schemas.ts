// zod schemas of jobs: an add's fields and input, the states, and the job as answered.
import { z } from "zod";
import { WATCH_JOB_PREFIX } from "../redis/keys";
import {
  Attempts,
  Backoff,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_TTR_SECONDS,
  NewJobId,
  Seconds,
  Timestamp,
  TopicName,
  Ttr,
} from "./value-schemas";

/** The fields of an add, shared by `POST /v1/jobs` and the command protocol's `add`. */
export const AddJobFields = {
  topic: TopicName.meta({
    description: "The topic: a group of jobs of one kind, consumed together.",
    example: "payments",
  }),
  id: NewJobId.optional().meta({
    description:
      "Your id, unique in the deployment; adding it again returns the stored job. Made by the " +
      "server when absent (give one if you may retry the add). " +
      `Ids starting with \`${WATCH_JOB_PREFIX}\` are delayq's own (payment watches).`,
    example: "order-1042",
  }),
  /** Any JSON value, stored as its JSON text and returned as such. */
  body: z
    .unknown()
    .optional()
    .meta({
      description:
        `Any JSON value, up to \`DQ_MAX_BODY_BYTES\` (${DEFAULT_MAX_BODY_BYTES / 1024} KiB); ` +
        "returned byte for byte as sent.",
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
      `Default: the topic's, else \`DQ_DEFAULT_TTR\` (${DEFAULT_TTR_SECONDS}).`,
    example: 60,
  }),
  maxAttempts: Attempts.optional().meta({
    description:
      "Reservations allowed before the job dies. Default: the topic's, else " +
      `\`DQ_DEFAULT_MAX_ATTEMPTS\` (${DEFAULT_MAX_ATTEMPTS}).`,
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

export const JobState = z.enum(["delayed", "ready", "reserved", "finished", "dead", "deleted"]);
export type JobState = z.output<typeof JobState>;
/** The states a topic indexes, and so the ones that can be listed. */
export const ListableState = z.enum(["delayed", "ready", "reserved", "dead"]);
export type ListableState = z.output<typeof ListableState>;

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
  /** The current reservation's receipt (reserved jobs only). */
  receipt: z
    .string()
    .optional()
    .meta({ description: "The current reservation's receipt (reserved jobs only)." }),
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
  lastError: z
    .object({
      message: z.string().meta({ description: "Why it failed (up to 1 KiB)." }),
      at: z.number().meta({ description: "When it was recorded, unix ms." }),
      attempt: z.number().meta({ description: "The attempt that failed (1 for the first)." }),
    })
    .optional()
    .meta({
      description:
        "Why the job last failed: the `error` of its last release or bury that gave one, or its " +
        "last failed push delivery's. Kept until the next failure replaces it.",
      example: { message: "card declined: insufficient funds", at: 1800000095000, attempt: 2 },
    }),
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
