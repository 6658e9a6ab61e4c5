// Refund watches (DESIGN §4, "Refund watches"): what starts one, what it reads as, and the
// outcome it fans out. They share the payment watches' accounts, notify topics and metadata.
import { z } from "zod";
import { AccountName, OutTradeNo, ProviderField, WatchInput, watchViewFields } from "./payments";
import { Backoff, Timestamp } from "./schemas";

/** The default schedule of a refund watch: the `refund` preset (1 min, 5, 10, 20, 30 min). */
export const DEFAULT_REFUND_SCHEDULE = "refund" satisfies Backoff;

/** How long a refund watch runs without an outcome when no deadline is given: 7 days. */
export const DEFAULT_REFUND_WATCH_MS = 7 * 24 * 3600_000;

/**
 * The ended states a verified late success of a refund is still told for (refund.succeeded with
 * "late": true, once): the watch gave up on it (expired), was told it closed or went abnormal,
 * or was stopped, and the money left all the same.
 */
export const LATE_REFUND_AFTER = ["expired", "closed", "abnormal", "stopped"] as const;

export const OutRefundNo = z
  .string()
  .regex(
    /^[A-Za-z0-9_*|.:@-]{1,64}$/,
    "must be 1-64 characters of A-Z a-z 0-9 _ * | . : @ - (the merchant's refund number)",
  )
  .meta({
    description:
      "The merchant's refund number: WeChat Pay's out_refund_no, Alipay's out_request_no.",
    example: "refund-1042-1",
  });

export const RefundInput = z
  .strictObject({
    provider: ProviderField,
    account: AccountName,
    outRefundNo: OutRefundNo,
    outTradeNo: OutTradeNo.optional().meta({
      description:
        "The refunded order's number (out_trade_no): required for Alipay, whose refund query " +
        "names the trade; optional for WeChat Pay (its answers must then name that order).",
      example: "order-1042",
    }),
    schedule: Backoff.optional().meta({
      description:
        "When to query: the first query comes this backoff's first step after the start, each " +
        "later one the next step after the previous query (the last step repeats). Default: " +
        "the refund preset (1 min, 5 min, 10 min, 20 min, 30 min: WeChat Pay's advice). Every " +
        "wait must be at least DQ_MIN_POLL_MS.",
      example: "refund",
    }),
    deadline: Timestamp.optional().meta({
      description:
        "Stop then, unix ms or ISO-8601 (default 7 days after the start; at most 400 days " +
        "after it): a refund not done by then ends expired.",
      example: 1_800_604_800_000,
    }),
    notify: WatchInput.shape.notify,
    metadata: WatchInput.shape.metadata,
  })
  .superRefine((refund, ctx) => {
    if (refund.provider === "alipay" && refund.outTradeNo === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["outTradeNo"],
        message:
          "required for Alipay: its refund query names the trade (out_trade_no) beside the " +
          "refund (out_request_no)",
      });
    }
  })
  .meta({ id: "WatchRefund" });
export type RefundInput = z.input<typeof RefundInput>;

export const RefundState = z.enum([
  "polling",
  "succeeded",
  "closed",
  "abnormal",
  "expired",
  "stopped",
]);
export type RefundState = z.output<typeof RefundState>;

export const RefundEvent = z.enum([
  "refund.succeeded",
  "refund.closed",
  "refund.abnormal",
  "refund.expired",
]);
export type RefundEvent = z.output<typeof RefundEvent>;

const REFUND_VIEW = watchViewFields({
  polls: 2,
  nextPollAt: 1_800_000_360_000,
  deadline: 1_800_604_800_000,
  notify: "refund-results",
});

export const Refund = z
  .object({
    provider: ProviderField,
    account: REFUND_VIEW.account,
    outRefundNo: z
      .string()
      .meta({ description: "The merchant's refund number.", example: "refund-1042-1" }),
    outTradeNo: z
      .string()
      .optional()
      .meta({ description: "The refunded order, as given.", example: "order-1042" }),
    state: RefundState.meta({
      description:
        "polling until an outcome; stopped once deleted; expired when the deadline passed " +
        "before the refund ended. A verified success after the watch ended expired, closed, " +
        "abnormal or stopped makes it succeeded: its late outcome is `outcome`.",
      example: "polling",
    }),
    polls: REFUND_VIEW.polls,
    nextPollAt: REFUND_VIEW.nextPollAt,
    lastAnswer: z
      .object({
        status: z.string().meta({
          description: "The provider's own word (PROCESSING, REFUND_SUCCESS, …), or the error.",
          example: "PROCESSING",
        }),
        at: z
          .number()
          .meta({ description: "When it was answered, unix ms.", example: 1_800_000_060_000 }),
      })
      .optional()
      .meta({
        description: "The last answer (or error) seen.",
        example: { status: "PROCESSING", at: 1_800_000_060_000 },
      }),
    outcome: z
      .unknown()
      .optional()
      .meta({
        description:
          "The outcome sent to the notify topics; after a late success, the late one " +
          "(`late: true`), the earlier one being `firstOutcome`.",
        example: {
          event: "refund.succeeded",
          status: "SUCCESS",
          amount: { refund: 500, total: 1999, currency: "CNY" },
        },
      }),
    firstOutcome: z
      .unknown()
      .optional()
      .meta({
        description:
          "After a late success (`outcome.late`): the outcome the watch had ended with before " +
          "it (none when it was stopped).",
        example: { event: "refund.expired", status: "PROCESSING" },
      }),
    createdAt: REFUND_VIEW.createdAt,
    deadline: REFUND_VIEW.deadline,
    notify: REFUND_VIEW.notify,
    metadata: REFUND_VIEW.metadata,
  })
  .meta({
    id: "Refund",
    description: "A refund watch: the refund, its queries, and its outcome once it has one.",
    example: {
      provider: "wechatpay",
      account: "shop",
      outRefundNo: "refund-1042-1",
      outTradeNo: "order-1042",
      state: "polling",
      polls: 1,
      nextPollAt: 1_800_000_360_000,
      lastAnswer: { status: "PROCESSING", at: 1_800_000_060_000 },
      createdAt: 1_800_000_000_000,
      deadline: 1_800_604_800_000,
      notify: ["refund-results"],
      metadata: { orderId: 1042 },
    },
  });
export type Refund = z.output<typeof Refund>;
