// Payment watches (DESIGN §4): what starts one, what it reads as, and the outcome it fans out.
import { z } from "zod";
import { BACKOFF_SCHEDULES, Backoff, Timestamp, TopicName } from "./schemas";

export const PROVIDERS = ["alipay", "wechatpay"] as const;
export type ProviderName = (typeof PROVIDERS)[number];

/** The default poll schedule of each provider (a named backoff). */
export const DEFAULT_SCHEDULE: Record<ProviderName, Backoff> = {
  wechatpay: "wechatpay",
  alipay: "alipay",
};

/** How long a watch runs without an outcome when no deadline is given: 24 h. */
export const DEFAULT_WATCH_MS = 24 * 3600_000;

/**
 * The furthest a watch's deadline (payment or refund) may lie ahead: 400 days. A watch polls its
 * provider until then, so a deadline centuries ahead would have delayq query it forever.
 */
export const MAX_WATCH_MS = 400 * 86_400_000;

/** The most watches polling at once that one token started, by default (DQ_MAX_WATCHES_PER_TOKEN). */
export const DEFAULT_MAX_WATCHES_PER_TOKEN = 100_000;

/**
 * How long an ended watch (any state) is kept at least, whatever DQ_RETENTION_SECONDS says
 * (the longer of the two wins): 25 hours, both providers' notification windows (Alipay resends
 * for about 24.4 h, WeChat Pay for about 24 h), so that a late notification still finds its
 * watch: a late payment is told once, and a notification's id is remembered as long.
 */
export const ENDED_WATCH_KEEP_MS = 25 * 3600_000;

/**
 * The ended states a verified late payment is still told for (payment.paid or payment.mismatch
 * with "late": true, once): the watch gave up or was stopped, and the money came anyway.
 */
export const LATE_PAYMENT_AFTER = ["expired", "closed", "failed", "stopped"] as const;

export const MAX_NOTIFY_TOPICS = 10;
/**
 * The shortest wait between two polls of one watch a schedule may ask for, ms (DQ_MIN_POLL_MS's
 * default): providers rate-limit order queries.
 */
export const MIN_POLL_MS = 1000;
/** The largest `metadata`, in bytes of JSON: it rides in every outcome job's body. */
export const MAX_METADATA_BYTES = 16_384;

/**
 * Why a watch may not poll on `schedule`, or undefined: a wait under `minPollMs` (DQ_MIN_POLL_MS),
 * a named preset's included. Refused rather than clamped: a preset's cadence is the provider's
 * rule, and a watch silently polling at another one would not be on the schedule it was given.
 */
export function scheduleProblem(schedule: Backoff, minPollMs: number): string | undefined {
  const shortest = shortestStep(schedule);
  if (shortest * 1000 >= minPollMs) return undefined;
  const named =
    typeof schedule === "string" ? `"${schedule}" waits ${shortest} s between polls; ` : "";
  return (
    `schedule: ${named}every wait must be at least ${minPollMs / 1000} s (DQ_MIN_POLL_MS): ` +
    "providers rate-limit order queries"
  );
}

/** The shortest wait a backoff ever gives, seconds (exponential: its first, or its max). */
export function shortestStep(backoff: Backoff): number {
  if (typeof backoff === "number") return backoff;
  if (typeof backoff === "string") return Math.min(...BACKOFF_SCHEDULES[backoff]);
  if (Array.isArray(backoff)) return Math.min(...backoff);
  return Math.min(backoff.delay, backoff.max ?? Number.POSITIVE_INFINITY);
}

export const ProviderField = z.enum(PROVIDERS).meta({
  description: "The payment provider.",
  example: "wechatpay",
});
export const AccountName = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,64}$/, "must be 1-64 characters of A-Z a-z 0-9 _ . -")
  .meta({
    description: "An account name from DQ_ALIPAY_ACCOUNTS / DQ_WECHATPAY_ACCOUNTS.",
    example: "shop",
  });
export const OutTradeNo = z
  .string()
  .regex(
    /^[A-Za-z0-9_*|.:-]{1,64}$/,
    "must be 1-64 characters of A-Z a-z 0-9 _ * | . : - (the merchant's order number)",
  )
  .meta({ description: "The merchant's order number (out_trade_no).", example: "order-1042" });

/** The currency of an amount given without one. */
export const DEFAULT_CURRENCY = "CNY";

/** An amount as the API reads and writes it: whole units of the smallest denomination (fen). */
export const PaymentAmount = z
  .strictObject({
    total: z
      .number()
      // One message for a fraction and for a number past 2^53 - 1 (JSON numbers lose digits there).
      .int("must be a whole number of fen (1999 for ¥19.99), at most 9007199254740991")
      .positive("must be more than 0")
      .meta({ description: "In the smallest unit (fen for CNY).", example: 1999 }),
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/, "must be an ISO 4217 code of three capital letters, e.g. CNY")
      .optional()
      .meta({ description: `ISO 4217; default ${DEFAULT_CURRENCY}.`, example: "CNY" }),
  })
  .meta({
    id: "PaymentAmount",
    description: "An amount in the smallest unit of its currency.",
    example: { total: 1999, currency: "CNY" },
  });

export const WatchInput = z
  .strictObject({
    provider: ProviderField,
    account: AccountName,
    outTradeNo: OutTradeNo,
    schedule: Backoff.optional().meta({
      description:
        "When to poll: the first poll comes this backoff's first step after the watch starts, " +
        "each later one the next step after the previous poll (the last step repeats). " +
        "Default: the provider's (wechatpay: 5 s, 30 s, 1 min, 3 min, ...; alipay: 4 min, 10 min, ...). " +
        "Presets from the providers' advice: wechatpay-native (5 s steps through the first " +
        "minute, then backing off), alipay-f2f (4 s steps for a minute, then backing off), " +
        "refund (1 min, 5, 10, 20, 30 min). " +
        "Every wait must be at least DQ_MIN_POLL_MS (1 s by default), a preset's too.",
      example: [5, 30, 60],
    }),
    deadline: Timestamp.optional().meta({
      description:
        "Stop polling then, unix ms or ISO-8601 (default 24 h after the start; at most 400 " +
        "days after it).",
      example: 1_800_086_400_000,
    }),
    closeOnDeadline: z.boolean().optional().meta({
      description: "At the deadline, close the order at the provider (then query it once more).",
      example: false,
    }),
    amount: PaymentAmount.optional().meta({
      description:
        "What the order must be paid: a verified paid answer with another total or currency " +
        "ends the watch `mismatch` (event payment.mismatch, with `amount` and `expected`), " +
        "never paid. Without it, any amount is taken.",
      example: { total: 1999, currency: "CNY" },
    }),
    notify: z
      .array(TopicName)
      .min(1)
      .max(MAX_NOTIFY_TOPICS)
      .refine((topics) => new Set(topics).size === topics.length, "name each topic once")
      .meta({
        description: "1-10 topics that each get the outcome as a job (pull, or push to webhooks).",
        example: ["payment-results"],
      }),
    metadata: z
      .unknown()
      .optional()
      .meta({
        description: `Any JSON up to ${MAX_METADATA_BYTES} bytes, echoed in the outcome as sent.`,
        example: { orderId: 1042 },
      }),
  })
  .meta({ id: "WatchPayment" });
export type WatchInput = z.input<typeof WatchInput>;

export const WatchState = z.enum([
  "polling",
  "paid",
  "closed",
  "failed",
  "expired",
  "stopped",
  "mismatch",
]);
export type WatchState = z.output<typeof WatchState>;

export const OutcomeEvent = z.enum([
  "payment.paid",
  "payment.closed",
  "payment.failed",
  "payment.expired",
  "payment.mismatch",
]);
export type OutcomeEvent = z.output<typeof OutcomeEvent>;

/**
 * The fields a payment watch's and a refund watch's view share, with each kind's examples: its
 * account, polls, next poll, start, deadline, notify topics and metadata.
 */
export function watchViewFields(examples: {
  polls: number;
  nextPollAt: number;
  deadline: number;
  notify: string;
}) {
  return {
    account: z.string().meta({ description: "The account.", example: "shop" }),
    polls: z.number().meta({ description: "Queries made so far.", example: examples.polls }),
    nextPollAt: z
      .number()
      .optional()
      .meta({ description: "When the next query is due, unix ms.", example: examples.nextPollAt }),
    createdAt: z
      .number()
      .meta({ description: "When the watch started, unix ms.", example: 1_800_000_000_000 }),
    deadline: z
      .number()
      .meta({ description: "When polling stops, unix ms.", example: examples.deadline }),
    notify: z
      .array(z.string())
      .meta({ description: "The topics told of the outcome.", example: [examples.notify] }),
    metadata: z
      .unknown()
      .optional()
      .meta({ description: "As given at the start, byte for byte.", example: { orderId: 1042 } }),
  };
}

const PAYMENT_VIEW = watchViewFields({
  polls: 3,
  nextPollAt: 1_800_000_030_000,
  deadline: 1_800_086_400_000,
  notify: "payment-results",
});

export const Payment = z
  .object({
    provider: ProviderField,
    account: PAYMENT_VIEW.account,
    outTradeNo: z
      .string()
      .meta({ description: "The merchant's order number.", example: "order-1042" }),
    state: WatchState.meta({
      description:
        "polling until an outcome; stopped once deleted; mismatch when paid with another " +
        "amount than `amount`. A verified payment after the watch ended expired, closed, " +
        "failed or stopped makes it paid (or mismatch): its late outcome is `outcome`.",
      example: "polling",
    }),
    polls: PAYMENT_VIEW.polls,
    nextPollAt: PAYMENT_VIEW.nextPollAt,
    lastAnswer: z
      .object({
        tradeState: z
          .string()
          .meta({ description: "The provider's own word, or the error.", example: "NOTPAY" }),
        at: z
          .number()
          .meta({ description: "When it was answered, unix ms.", example: 1_800_000_005_000 }),
      })
      .optional()
      .meta({
        description: "The last answer (or error) seen.",
        example: { tradeState: "NOTPAY", at: 1_800_000_005_000 },
      }),
    outcome: z
      .unknown()
      .optional()
      .meta({
        description:
          "The outcome sent to the notify topics (see the outcome event); after a late " +
          "payment, the late one (`late: true`), the earlier one being `firstOutcome`.",
        example: {
          event: "payment.paid",
          tradeState: "SUCCESS",
          amount: { total: 1999, currency: "CNY" },
        },
      }),
    amount: z
      .object({
        total: z.number().meta({ description: "In the smallest unit (fen).", example: 1999 }),
        currency: z.string().meta({ description: "ISO 4217.", example: "CNY" }),
      })
      .optional()
      .meta({
        description: "The amount the order must be paid, when the watch was given one.",
        example: { total: 1999, currency: "CNY" },
      }),
    firstOutcome: z
      .unknown()
      .optional()
      .meta({
        description:
          "After a late payment (`outcome.late`): the outcome the watch had ended with before " +
          "it (expired, closed or failed; none when it was stopped).",
        example: { event: "payment.expired", tradeState: "WAIT_BUYER_PAY" },
      }),
    createdAt: PAYMENT_VIEW.createdAt,
    deadline: PAYMENT_VIEW.deadline,
    notify: PAYMENT_VIEW.notify,
    metadata: PAYMENT_VIEW.metadata,
  })
  .meta({
    id: "Payment",
    description: "A payment watch: the order, its polls, and its outcome once it has one.",
    example: {
      provider: "wechatpay",
      account: "shop",
      outTradeNo: "order-1042",
      state: "polling",
      polls: 1,
      nextPollAt: 1_800_000_035_000,
      lastAnswer: { tradeState: "NOTPAY", at: 1_800_000_005_000 },
      createdAt: 1_800_000_000_000,
      deadline: 1_800_086_400_000,
      notify: ["payment-results"],
      metadata: { orderId: 1042 },
    },
  });
export type Payment = z.output<typeof Payment>;
