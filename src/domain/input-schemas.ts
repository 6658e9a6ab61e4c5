// zod schemas of the operations' inputs: pop, receipt, release, kick and list.
import { z } from "zod";
import { ListableState } from "./job-schemas";
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
