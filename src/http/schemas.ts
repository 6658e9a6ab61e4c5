// The API's request and response schemas, named for the OpenAPI document; built on the domain's.
import { z } from "@hono/zod-openapi";
import { ERROR_STATUS, type ErrorCode } from "../domain/errors";
import * as domain from "../domain/schemas";

export const ErrorBody = z
  .object({
    error: z
      .object({
        code: z
          .enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]])
          .meta({ description: "A stable code: branch on it." }),
        message: z.string().meta({
          description:
            "What went wrong and what to change, for a person. A 5xx's ends with " +
            "`see the logs for request <requestId>`: the operator's log line of that id says why.",
        }),
        requestId: z
          .string()
          .optional()
          .meta({
            description:
              "The request's id, as in its `x-request-id` header (the one sent, if it was 1-64 " +
              "of A-Z a-z 0-9 . _ -; else a new one). Absent from an item of a batch's results.",
            example: "0b5c1a52-3c5e-4f0e-9a8e-2f1d7c9e4b11",
          }),
      })
      .meta({ description: "The error: a code to branch on and a message to show." }),
  })
  .meta({
    id: "Error",
    example: {
      error: {
        code: "job_not_found",
        message: "Job order-1042 does not exist",
        requestId: "0b5c1a52-3c5e-4f0e-9a8e-2f1d7c9e4b11",
      },
    },
  });

const JOB_EXAMPLE = {
  id: "order-1042",
  topic: "payments",
  state: "reserved",
  body: { order: "1042", provider: "wechatpay" },
  dueAt: 1800000030000,
  ttr: 60,
  attempts: 1,
  maxAttempts: 8,
  backoff: "wechatpay",
  createdAt: 1800000000000,
  reservedUntil: 1800000090000,
  receipt: "p1.mywpj0qw.mywpiww0.12nq13p",
};
export const Job = domain.Job.meta({
  id: "Job",
  description: "A job and where it is in its life. Times are unix ms, `ttr` seconds.",
  example: JOB_EXAMPLE,
});
export const AddJob = domain.AddJobInput.meta({
  id: "AddJob",
  description: "A job to add. Unknown fields are refused, so a typo cannot run a job at once.",
  example: {
    topic: "payments",
    id: "order-1042",
    delay: 30,
    ttr: 60,
    backoff: "wechatpay",
    maxAttempts: 8,
    body: { order: "1042", provider: "wechatpay" },
  },
});
export const AddResult = z
  .object({
    created: z.boolean().meta({
      description: "true: added now (201); false: the id existed, this is the stored job (200).",
    }),
    job: Job,
  })
  .meta({ id: "AddResult" });
export const BatchBody = z
  .strictObject({
    jobs: z
      .array(z.unknown().meta({ description: "An AddJob; each item is validated on its own" }))
      .min(1)
      .max(domain.MAX_BATCH)
      .meta({
        description: "1-1000 jobs to add, each an AddJob.",
        example: [
          { topic: "mail", id: "welcome-7", body: { to: "a@example.com" } },
          { topic: "mail", delay: 3600, body: { to: "b@example.com" } },
        ],
      }),
  })
  .meta({ id: "AddBatch" });
export const BatchResult = z
  .object({
    results: z.array(z.union([AddResult, ErrorBody])).meta({
      description: "One per job, in order: an AddResult, or an Error for a job refused.",
      example: [
        { created: true, job: JOB_EXAMPLE },
        { error: { code: "invalid_request", message: "Invalid jobs.1: delay: ..." } },
      ],
    }),
  })
  .meta({ id: "BatchResult" });
export const FinishBatchBody = z
  .strictObject({
    jobs: z
      .array(z.unknown().meta({ description: "A FinishItem; each item is validated on its own" }))
      .min(1)
      .max(domain.MAX_POP)
      .meta({
        description: "1-100 jobs to finish, each `{id, receipt?}` as pop gave them.",
        example: [
          { id: "order-1042", receipt: "p1.mywpj0qw.mywpiww0.12nq13p" },
          { id: "order-1043", receipt: "p1.mywpj0qw.mywpiww1.1b0kq2x" },
        ],
      }),
  })
  .meta({ id: "FinishBatch" });
/** One result per job to finish, in order (finishMany, and pop's `finish`). */
const FinishResults = z
  .array(
    z.union([
      z.object({ finished: z.literal(true).meta({ description: "Always true." }) }),
      ErrorBody,
    ]),
  )
  .meta({
    description:
      "One per job, in order: `{finished: true}`, or an Error for a job refused " +
      "(the status a single finish would have answered is in its code).",
    example: [
      { finished: true },
      {
        error: {
          code: "stale_receipt",
          message:
            "The receipt is not job order-1043's current one: its lease ran out and " +
            "another consumer reserved it",
        },
      },
    ],
  });
export const FinishBatchResult = z
  .object({ results: FinishResults })
  .meta({ id: "FinishBatchResult" });
export const JobBody = z.object({ job: Job }).meta({ id: "JobResponse" });
/** Whether a list answer has a next page, the same on every list. */
const hasMore = (what: string) =>
  z.boolean().meta({
    description:
      `true: there are more ${what}; ask again with \`cursor\` (a next page may hold fewer ` +
      "than `limit`, even none). false on the last page, which has no `cursor`.",
  });

export const JobList = z
  .object({
    jobs: z.array(Job).meta({ description: "The page's jobs." }),
    cursor: z.string().optional().meta({
      description: "Pass as `cursor` for the next page; absent on the last page.",
      example: "z1800000030000:order-1042",
    }),
    hasMore: hasMore("jobs"),
  })
  .meta({ id: "JobList" });
export const TopicStats = domain.TopicStats.meta({
  id: "TopicStats",
  example: {
    topic: "payments",
    counts: { delayed: 120, ready: 3, reserved: 2, dead: 1 },
    oldestDueAt: 1800000030000,
    config: { ttr: 60, backoff: "wechatpay" },
  },
});
export const TopicList = z
  .object({
    topics: z.array(TopicStats).meta({ description: "The page's topics, by name." }),
    cursor: z.string().optional().meta({
      description: "Pass as `cursor` for the next page; absent on the last page.",
      example: "payments",
    }),
    hasMore: hasMore("topics"),
  })
  .meta({ id: "TopicList" });
export const TopicConfig = domain.TopicConfig.meta({
  id: "TopicConfig",
  description: "A topic's config: defaults for its new jobs, pause, push delivery.",
  example: { ttr: 30, maxAttempts: 8, backoff: "alipay", paused: false },
});
export const TopicConfigPatch = domain.TopicConfigPatch.meta({ id: "TopicConfigPatch" });
export const AnsweredTopicConfig = domain.AnsweredTopicConfig.meta({
  id: "AnsweredTopicConfig",
  description:
    "A topic's config as answered: its push secret and the values of its push headers masked (`…` and the last 4 characters).",
  example: { ttr: 30, maxAttempts: 8, backoff: "alipay", paused: false },
});

export const IdParam = z.object({
  id: domain.JobId.meta({
    param: { name: "id", in: "path" },
    description: "The job's id.",
    example: "order-1042",
  }),
});
export const TopicParam = z.object({
  topic: domain.TopicName.meta({
    param: { name: "topic", in: "path" },
    description: "The topic's name.",
    example: "orders",
  }),
});

const whole = (name: string, max: number, description?: string) =>
  z.coerce
    .number()
    .int()
    .min(1)
    .max(max)
    .optional()
    .meta({ param: { name, in: "query" }, ...(description ? { description } : {}) });

export const ListQuery = z.object({
  state: domain.ListableState.meta({
    param: { name: "state", in: "query" },
    description: "The state to list.",
    example: "dead",
  }),
  cursor: z
    .string()
    .optional()
    .meta({
      param: { name: "cursor", in: "query" },
      description: "The previous page's `cursor`, as it was returned; none for the first page.",
    }),
  limit: whole("limit", domain.MAX_PAGE, "Jobs per page (default 100)."),
});
/** Where a page of topics starts: a topic name or a sealed cursor. */
const topicCursor = () =>
  z
    .string()
    .regex(
      /^(~[A-Za-z0-9_-]{1,300}|[A-Za-z0-9_.:-]{1,100})$/,
      "must be a topic name or the previous page's cursor",
    )
    .optional();

export const TopicsQuery = z.object({
  cursor: topicCursor().meta({
    param: { name: "cursor", in: "query" },
    description:
      "The previous page's `cursor`, as it was returned; none for the first page. A token not " +
      "limited to topics may also give any name, to list the topics after it (its cursors are " +
      "names); a limited token's cursors are sealed (`~…`), and it may give only those.",
    example: "payments",
  }),
  after: topicCursor().meta({
    param: { name: "after", in: "query", deprecated: true },
    description: "The former name of `cursor`, still accepted; give one of the two.",
    example: "payments",
  }),
  limit: whole("limit", 100, "Topics per page (default 100)."),
});
export const PurgeQuery = z.object({
  count: whole("count", domain.MAX_PAGE, "Dead jobs to delete, oldest first (default 1000)."),
});

export const PopBody = domain.PopInput.extend({
  finish: z
    .array(z.unknown().meta({ description: "A FinishItem; each item is validated on its own" }))
    .max(domain.MAX_POP)
    .optional()
    .meta({
      description:
        "0-100 jobs to finish before the pop takes any, each `{id, receipt?}` as the last pop " +
        "gave them: a consumer's finish and its next pop in one request and one script call " +
        "(BullMQ's worker and JetStream's AckNext do the same). Each is decided as " +
        "`POST /v1/jobs/{id}/finish` would decide it, and stays finished whatever the pop does.",
      example: [{ id: "order-1042", receipt: "p1.mywpj0qw.mywpiww0.12nq13p" }],
    }),
}).meta({ id: "Pop" });
export const PopResult = z
  .object({
    jobs: z.array(Job).meta({ description: "The reserved jobs (maybe none)." }),
    finished: FinishResults.optional().meta({
      description: "With `finish`: one result per job given, in order.",
    }),
  })
  .meta({ id: "PopResult" });
export const ReceiptBody = domain.ReceiptInput.meta({ id: "Receipt" });
export const ReleaseBody = domain.ReleaseInput.meta({ id: "Release" });
export const BuryBody = domain.BuryInput.meta({ id: "Bury" });
export const RescheduleBody = domain.RescheduleInput.meta({ id: "Reschedule" });
export const KickBody = domain.KickInput.meta({ id: "Kick" });

export const Health = z
  .object({
    status: z
      .enum(["ok", "degraded"])
      .meta({ description: "`ok`, or `degraded` when Redis does not answer." }),
    redis: z.enum(["ok", "unreachable"]).meta({ description: "Whether Redis answered a GET." }),
    message: z.string().optional().meta({
      description: "Why Redis is unreachable (degraded only).",
      example: "Redis did not answer within 5000 ms",
    }),
  })
  .meta({ id: "Health" });

/** `content` for a JSON body or response. */
export function json<T extends z.ZodType>(schema: T, description: string) {
  return { content: { "application/json": { schema } }, description };
}

export function body<T extends z.ZodType>(schema: T, required: boolean) {
  return { content: { "application/json": { schema } }, required };
}

const DESCRIPTIONS: Record<number, string> = {
  400: "Invalid input (`invalid_request`)",
  401: "Missing or wrong bearer token (`unauthorized`)",
  403: "The token may not act on this topic (`forbidden`)",
  404: "Not found (`job_not_found`, `payment_not_found`, `refund_not_found`, `schedule_not_found`)",
  409:
    "State conflict (`job_exists`, `job_reserved`, `not_reserved`, `stale_receipt`, " +
    "`push_topic`, `payment_exists`, `refund_exists`)",
  413: "Body too large (`payload_too_large`)",
  429:
    "The token has as many watches polling as it may (`too_many_watches`, " +
    "DQ_MAX_WATCHES_PER_TOKEN): wait for some to end, or stop some",
  503: "Redis unreachable (`redis_unavailable`); retry after `Retry-After` seconds",
};

/** Error responses for the given statuses; 400, 401 and 503 are on every /v1 route. */
export function errors(...statuses: (403 | 404 | 409 | 413 | 429)[]) {
  return Object.fromEntries(
    [400, 401, ...statuses, 503].map((status) => [
      status,
      json(ErrorBody, DESCRIPTIONS[status] as string),
    ]),
  ) as Record<400 | 401 | 503, ReturnType<typeof json<typeof ErrorBody>>>;
}

export const SECURED = [{ bearer: [] }];
