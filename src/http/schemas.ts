// The API's request and response schemas, named for the OpenAPI document; built on the domain's.
import { z } from "@hono/zod-openapi";
import { ERROR_STATUS, type ErrorCode } from "../domain/errors";
import * as domain from "../domain/schemas";

export const ErrorBody = z
  .object({
    error: z.object({
      code: z.enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
    }),
  })
  .meta({ id: "Error" });

export const Job = domain.Job.meta({ id: "Job" });
export const AddJob = domain.AddJobInput.meta({ id: "AddJob" });
export const AddResult = z.object({ created: z.boolean(), job: Job }).meta({ id: "AddResult" });
export const BatchBody = z
  .strictObject({
    jobs: z
      .array(z.unknown().meta({ description: "An AddJob; each item is validated on its own" }))
      .min(1)
      .max(domain.MAX_BATCH),
  })
  .meta({ id: "AddBatch" });
export const BatchResult = z
  .object({ results: z.array(z.union([AddResult, ErrorBody])) })
  .meta({ id: "BatchResult" });
export const JobBody = z.object({ job: Job }).meta({ id: "JobResponse" });
export const JobList = z
  .object({
    jobs: z.array(Job),
    cursor: z.string().optional().meta({ description: "Pass as cursor for the next page" }),
  })
  .meta({ id: "JobList" });
export const TopicStats = domain.TopicStats.meta({ id: "TopicStats" });
export const TopicList = z
  .object({ topics: z.array(TopicStats), cursor: z.string().optional() })
  .meta({ id: "TopicList" });
export const TopicConfig = domain.TopicConfig.meta({ id: "TopicConfig" });

export const IdParam = z.object({
  id: domain.JobId.meta({ param: { name: "id", in: "path" }, example: "order-1042" }),
});
export const TopicParam = z.object({
  topic: domain.TopicName.meta({ param: { name: "topic", in: "path" }, example: "orders" }),
});

const whole = (name: string, max: number) =>
  z.coerce
    .number()
    .int()
    .min(1)
    .max(max)
    .optional()
    .meta({ param: { name, in: "query" } });

export const ListQuery = z.object({
  state: domain.ListableState.meta({ param: { name: "state", in: "query" } }),
  cursor: z
    .string()
    .optional()
    .meta({ param: { name: "cursor", in: "query" } }),
  limit: whole("limit", domain.MAX_PAGE),
});
export const TopicsQuery = z.object({
  after: domain.TopicName.optional().meta({ param: { name: "after", in: "query" } }),
  limit: whole("limit", 100),
});
export const PurgeQuery = z.object({ count: whole("count", domain.MAX_PAGE) });

export const PopBody = domain.PopInput.meta({ id: "Pop" });
export const ReceiptBody = domain.ReceiptInput.meta({ id: "Receipt" });
export const ReleaseBody = domain.ReleaseInput.meta({ id: "Release" });
export const KickBody = domain.KickInput.meta({ id: "Kick" });

export const Health = z
  .object({
    status: z.enum(["ok", "degraded"]),
    redis: z.enum(["ok", "unreachable"]),
    message: z.string().optional(),
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
  404: "No such job (`job_not_found`)",
  409: "State conflict (`job_exists`, `job_reserved`, `not_reserved`, `stale_receipt`)",
  413: "Body too large (`payload_too_large`)",
  503: "Redis unreachable (`redis_unavailable`); retry after `Retry-After` seconds",
};

/** Error responses for the given statuses; 400, 401 and 503 are on every /v1 route. */
export function errors(...statuses: (403 | 404 | 409 | 413)[]) {
  return Object.fromEntries(
    [400, 401, ...statuses, 503].map((status) => [
      status,
      json(ErrorBody, DESCRIPTIONS[status] as string),
    ]),
  ) as Record<400 | 401 | 503, ReturnType<typeof json<typeof ErrorBody>>>;
}

export const SECURED = [{ bearer: [] }];
