// zod schemas of the operations' inputs: pop, receipt, release, kick and list.
import { z } from "zod";
import { AddJobFields, ListableState, ONE_DUE_TIME, oneDueTime } from "./job-schemas";
import { JobId, MAX_PAGE, MAX_POP, Receipt, Seconds } from "./value-schemas";

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
  example: "p1.mywpj0qw.mywpiww0.12nq13p",
});
export const ReceiptInput = z.strictObject({ receipt: RECEIPT_FIELD });
/** One job of a batch finish: its id, and the receipt its pop gave. */
export const FinishItem = z.strictObject({
  id: JobId.meta({ description: "The job to finish.", example: "order-1042" }),
  receipt: RECEIPT_FIELD,
});
/** The most bytes (UTF-8) of a release's or bury's `error` (redis/record.ts: MAX_ERROR_BYTES). */
export const MAX_ERROR_BYTES = 1024;
const utf8 = new TextEncoder();

const ERROR_FIELD = z
  .string()
  .min(1)
  .refine(
    (text) => text.length <= MAX_ERROR_BYTES / 3 || utf8.encode(text).length <= MAX_ERROR_BYTES,
    {
      message: `must be at most ${MAX_ERROR_BYTES} bytes (UTF-8): keep the gist, log the rest`,
    },
  )
  .optional()
  .meta({
    description:
      `Why the attempt failed, up to ${MAX_ERROR_BYTES} bytes: the job then reads ` +
      "`lastError: {message, at, attempt}`.",
    example: "card declined: insufficient funds",
  });

export const ReleaseInput = z.strictObject({
  receipt: RECEIPT_FIELD,
  delay: Seconds.optional().meta({
    description: "Seconds until the job is due again. Default: its backoff step.",
    example: 30,
  }),
  error: ERROR_FIELD,
});
export const BuryInput = z.strictObject({ receipt: RECEIPT_FIELD, error: ERROR_FIELD });

/** A new due time: `delay` seconds from now or `runAt`, one of them (as for an add). */
export const RescheduleInput = z
  .strictObject({
    delay: AddJobFields.delay.meta({
      description: "Seconds from now until the job is due (fractions allowed). Excludes `runAt`.",
      example: 300,
    }),
    runAt: AddJobFields.runAt.meta({
      description:
        "When the job is due: unix ms or ISO-8601 with a zone; a time already past means due " +
        "now. Excludes `delay`.",
      example: "2027-01-15T08:00:00+08:00",
    }),
  })
  .refine(oneDueTime, ONE_DUE_TIME)
  .refine((input) => input.delay !== undefined || input.runAt !== undefined, {
    message: "give the new due time: delay (seconds from now) or runAt",
    path: ["delay"],
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
