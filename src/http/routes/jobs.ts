// Routes on jobs: add, batch add, get, delete, the reservation verbs finish/touch/release/bury,
// batch finish, and reschedule/promote of a waiting job.
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { requestJson } from "../body";
import type { AppEnv } from "../context";
import { jsonBody } from "../json";
import { documentedRoute } from "../route";
import {
  AddJob,
  AddResult,
  BatchBody,
  BatchResult,
  BuryBody,
  body,
  errors,
  FinishBatchBody,
  FinishBatchResult,
  IdParam,
  JobBody,
  json,
  ReceiptBody,
  ReleaseBody,
  RescheduleBody,
  SECURED,
} from "../schemas";

const tags = ["jobs"];

export function jobRoutes(app: OpenAPIHono<AppEnv>): void {
  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/jobs",
      operationId: "addJob",
      tags,
      security: SECURED,
      summary: "Add a job",
      description:
        "Adds a job to run after `delay` seconds or at `runAt`. Re-adding an id that exists in " +
        "the same topic returns the stored job with `created: false`; `replace: true` " +
        "overwrites it unless it is reserved.",
      request: { body: body(AddJob, true) },
      responses: {
        201: json(AddResult, "Added"),
        200: json(AddResult, "The id exists: the stored job, unchanged"),
        ...errors(403, 409, 413),
      },
    }),
    async (c) => {
      const result = await c.get("queue").add(requestJson(c, c.req.valid("json")));
      return result.created ? jsonBody(c, result, 201) : jsonBody(c, result, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/jobs/batch",
      operationId: "addBatch",
      tags,
      security: SECURED,
      summary: "Add up to 1000 jobs",
      description:
        "One request, one Redis round trip. Each item is validated and added on its own: " +
        "`results` has one entry per item, in order, either `{created, job}` or `{error}`.",
      request: { body: body(BatchBody, true) },
      responses: { 200: json(BatchResult, "One result per item"), ...errors(413) },
    }),
    async (c) => {
      const { jobs } = requestJson(c, c.req.valid("json"));
      const results = await c.get("queue").addBatch(jobs);
      return jsonBody(c, { results }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "get",
      path: "/v1/jobs/{id}",
      operationId: "getJob",
      tags,
      security: SECURED,
      summary: "Get a job and its state",
      request: { params: IdParam },
      responses: { 200: json(JobBody, "The job"), ...errors(403, 404) },
    }),
    async (c) => jsonBody(c, { job: await c.get("queue").get(c.req.valid("param").id) }, 200),
  );

  documentedRoute(
    app,
    createRoute({
      method: "delete",
      path: "/v1/jobs/{id}",
      operationId: "deleteJob",
      tags,
      security: SECURED,
      summary: "Delete a job in any state",
      description: "A deleted job is never handed out afterwards. Deleting it again succeeds.",
      request: { params: IdParam },
      responses: {
        200: json(
          z.object({ deleted: z.literal(true).meta({ description: "Always true." }) }),
          "Deleted",
        ),
        ...errors(403, 404),
      },
    }),
    async (c) => {
      await c.get("queue").delete(c.req.valid("param").id);
      return c.json({ deleted: true as const }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/jobs/{id}/finish",
      operationId: "finishJob",
      tags,
      security: SECURED,
      summary: "Finish a reserved job",
      description:
        "With `receipt`, only the current reservation may finish it (else 409 `stale_receipt`); " +
        "without, whoever holds it. Finishing a finished job again succeeds.",
      request: { params: IdParam, body: body(ReceiptBody, false) },
      responses: {
        200: json(
          z.object({ finished: z.literal(true).meta({ description: "Always true." }) }),
          "Finished",
        ),
        ...errors(403, 404, 409),
      },
    }),
    async (c) => {
      await c.get("queue").finish(c.req.valid("param").id, c.req.valid("json"));
      return c.json({ finished: true as const }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/jobs/finish",
      operationId: "finishMany",
      tags,
      security: SECURED,
      summary: "Finish up to 100 reserved jobs",
      description:
        "What a consumer sends after working through one pop's jobs: one request, one script " +
        "call. Each job is decided as `POST /v1/jobs/{id}/finish` would decide it, on its own: " +
        "`results` has one entry per item, in order, `{finished: true}` or `{error}`; a refused " +
        "item leaves the others finished.",
      request: { body: body(FinishBatchBody, true) },
      responses: { 200: json(FinishBatchResult, "One result per item"), ...errors(413) },
    }),
    async (c) => {
      // Each item is validated by finishMany, on its own.
      const jobs = c.req.valid("json").jobs as { id: string; receipt?: string }[];
      return c.json({ results: await c.get("queue").finishMany(jobs) }, 200);
    },
  );

  const verbs = [
    ["touch", "Extend a reservation by its TTR", ReceiptBody],
    ["release", "Give a reserved job back, after `delay` or its backoff step", ReleaseBody],
    ["bury", "Move a reserved job to its topic's dead letter", BuryBody],
  ] as const;
  for (const [verb, summary, schema] of verbs) {
    documentedRoute(
      app,
      createRoute({
        method: "post",
        path: `/v1/jobs/{id}/${verb}`,
        operationId: `${verb}Job`,
        tags,
        security: SECURED,
        summary,
        request: { params: IdParam, body: body(schema, false) },
        responses: { 200: json(JobBody, "The job after the change"), ...errors(403, 404, 409) },
      }),
      async (c) => {
        const { id } = c.req.valid("param");
        const input = c.req.valid("json");
        const job =
          verb === "touch"
            ? await c.get("queue").touch(id, input)
            : verb === "bury"
              ? await c.get("queue").bury(id, input)
              : await c.get("queue").release(id, input);
        return jsonBody(c, { job }, 200);
      },
    );
  }

  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/jobs/{id}/reschedule",
      operationId: "rescheduleJob",
      tags,
      security: SECURED,
      summary: "Give a delayed or ready job a new due time",
      description:
        "The job becomes due `delay` seconds from now or at `runAt` (a time past: due now); a " +
        "ready job goes back to waiting if the time is ahead. Its attempts, body and id stay. " +
        "It is never handed out before the new time, and never lost between the two. Another " +
        "state is refused with 409 `invalid_state`: reserved (a consumer holds it; a push job " +
        "claimed for delivery, up to 65 s before it is due, or published to QStash), finished, " +
        "dead or deleted.",
      request: { params: IdParam, body: body(RescheduleBody, true) },
      responses: { 200: json(JobBody, "The job with its new dueAt"), ...errors(403, 404, 409) },
    }),
    async (c) => {
      const job = await c.get("queue").reschedule(c.req.valid("param").id, c.req.valid("json"));
      return jsonBody(c, { job }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/jobs/{id}/promote",
      operationId: "promoteJob",
      tags,
      security: SECURED,
      summary: "Make a delayed job ready now",
      description:
        "Its due time becomes now: the next pop may take it (a push topic delivers it at once). " +
        "A job that is not delayed (ready already, reserved, finished, dead, deleted) is " +
        "refused with 409 `invalid_state`.",
      request: { params: IdParam },
      responses: { 200: json(JobBody, "The job, ready"), ...errors(403, 404, 409) },
    }),
    async (c) => jsonBody(c, { job: await c.get("queue").promote(c.req.valid("param").id) }, 200),
  );
}
