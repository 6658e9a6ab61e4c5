// zod schemas of topics: job defaults, the config (whole and as a patch) and the stats.
import { z } from "zod";
import { PushConfig } from "./push";
import { Attempts, Backoff, DEFAULT_MAX_ATTEMPTS, DEFAULT_TTR_SECONDS, Ttr } from "./value-schemas";

export const JobDefaults = z.strictObject({
  ttr: Ttr.optional().meta({
    description:
      "Time to run of the topic's new jobs, seconds " +
      `(else \`DQ_DEFAULT_TTR\`, ${DEFAULT_TTR_SECONDS}).`,
    example: 30,
  }),
  maxAttempts: Attempts.optional().meta({
    description:
      "Attempts of the topic's new jobs " +
      `(else \`DQ_DEFAULT_MAX_ATTEMPTS\`, ${DEFAULT_MAX_ATTEMPTS}).`,
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

/** A topic's config as answered: a push secret is masked (`…` and its last 4 characters). */
export const AnsweredTopicConfig = TopicConfig.extend({
  push: PushConfig.extend({
    secret: z
      .string()
      .optional()
      .meta({
        description:
          "`…` and the secret's last 4 characters; the whole secret only in the answer that " +
          "generated it.",
        example: "…7c0d",
      }),
  })
    .nullable()
    .optional()
    .meta({
      description: "The push config, its secret masked; null or absent: pulled.",
      example: { url: "https://shop.example/hooks/delayq", via: "direct", secret: "…7c0d" },
    }),
});

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
  heldBack: z
    .number()
    .optional()
    .meta({
      description:
        "Push topics: jobs due and not yet sent, held back by the push config's `rate` or " +
        "`parallelism` (or waiting for a claim); they go out in due order as room frees.",
      example: 3,
    }),
  heldBackSince: z.number().optional().meta({
    description:
      "Push topics: the earliest due time among the held-back jobs, unix ms; absent when none.",
    example: 1800000030000,
  }),
  config: AnsweredTopicConfig.meta({
    description: "The topic's config: job defaults, pause, push (its secret masked).",
  }),
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
