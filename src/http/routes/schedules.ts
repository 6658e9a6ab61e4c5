// Recurring schedules over HTTP (DESIGN §10): PUT, GET and DELETE /v1/schedules/{name}, and
// GET /v1/schedules. A token limited to topics manages the schedules of its topics only.
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { DelayqError } from "../../domain/errors";
import { MAX_SCHEDULE_PAGE, Schedule, ScheduleInput, ScheduleName } from "../../domain/schedules";
import type { Schedules } from "../../schedules/schedules";
import type { AppEnv } from "../context";
import { jsonBody } from "../json";
import { documentedRoute } from "../route";
import { body, errors, json, SECURED } from "../schemas";

export type ScheduleRouteOptions = {
  schedules: Schedules;
  /** Delivers the fires a put made in push topics that fall due soon (pushSoon). */
  pushed?: (
    c: Context<AppEnv>,
    pushed: { topic: string; via: "direct" | "qstash"; dueAt: number }[],
  ) => void;
};

const NameParam = z.object({
  name: ScheduleName.meta({ param: { name: "name", in: "path" } }),
});

const ScheduleAnswer = z.object({ schedule: Schedule }).meta({ id: "ScheduleAnswer" });

const ListQuery = z.object({
  cursor: ScheduleName.optional().meta({
    param: { name: "cursor", in: "query" },
    description:
      "The previous page's `cursor`; none for the first page. Any name lists the schedules " +
      "named after it.",
    example: "daily-report",
  }),
  after: ScheduleName.optional().meta({
    param: { name: "after", in: "query", deprecated: true },
    description: "Another name of `cursor`, as the topics' list has it; give one of the two.",
    example: "daily-report",
  }),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_SCHEDULE_PAGE)
    .optional()
    .meta({
      param: { name: "limit", in: "query" },
      description: `Schedules per page, by name (default 100, at most ${MAX_SCHEDULE_PAGE}).`,
      example: 100,
    }),
});

const ScheduleList = z
  .object({
    schedules: z.array(Schedule).meta({ description: "Schedules, by name.", example: [] }),
    cursor: z.string().optional().meta({
      description: "Pass as `cursor` for the next page; absent on the last page.",
      example: "daily-report",
    }),
    hasMore: z.boolean().meta({
      description:
        "true: there may be more schedules; ask again with `cursor` (a next page may hold " +
        "fewer than `limit`, even none). false on the last page, which has no `cursor`.",
    }),
  })
  .meta({ id: "ScheduleList" });

export function scheduleRoutes(app: OpenAPIHono<AppEnv>, options: ScheduleRouteOptions): void {
  const tags = ["schedules"];
  const { schedules } = options;
  const scopeOf = (c: Context<AppEnv>) => c.get("queue").scope;
  const now = (c: Context<AppEnv>) => c.get("queue").clock();

  documentedRoute(
    app,
    createRoute({
      method: "put",
      path: "/v1/schedules/{name}",
      operationId: "putSchedule",
      tags,
      security: SECURED,
      summary: "Create or replace a recurring schedule: a job in its topic at each cron time",
      description:
        "Each fire is the job `{name}@{fire time, unix ms}` in the topic, due at the fire time " +
        "exactly (pulled or pushed like any job), made once however many ticks and instances " +
        "run; fires are made up to 80 s ahead as delayed jobs. After an outage only the latest " +
        "fire missed is made. Putting a schedule as it is changes nothing; putting it changed " +
        "takes back its fires made ahead and not yet due, and starts from the next fire. A " +
        "topic-limited token may use its topics only (403).",
      request: { params: NameParam, body: body(ScheduleInput, true) },
      responses: { 200: json(ScheduleAnswer, "The schedule, created or replaced"), ...errors(403) },
    }),
    async (c) => {
      requireBody(c);
      const { name } = c.req.valid("param");
      const input = c.req.valid("json");
      const put = await schedules.put(name, input, scopeOf(c), now(c));
      if (put.pushed.length > 0) options.pushed?.(c, put.pushed);
      return jsonBody(c, { schedule: put.schedule }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "get",
      path: "/v1/schedules/{name}",
      operationId: "getSchedule",
      tags,
      security: SECURED,
      summary: "A schedule, with its next and last fire times",
      request: { params: NameParam },
      responses: { 200: json(ScheduleAnswer, "The schedule"), ...errors(404) },
    }),
    async (c) => {
      const schedule = await schedules.get(c.req.valid("param").name, scopeOf(c), now(c));
      return jsonBody(c, { schedule }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "delete",
      path: "/v1/schedules/{name}",
      operationId: "deleteSchedule",
      tags,
      security: SECURED,
      summary: "Delete a schedule (its fires made ahead and not yet due are taken back)",
      request: { params: NameParam },
      responses: {
        200: json(
          z.object({ deleted: z.literal(true).meta({ description: "Deleted.", example: true }) }),
          "Deleted",
        ),
        ...errors(404),
      },
    }),
    async (c) => {
      await schedules.delete(c.req.valid("param").name, scopeOf(c), now(c));
      return c.json({ deleted: true as const }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "get",
      path: "/v1/schedules",
      operationId: "listSchedules",
      tags,
      security: SECURED,
      summary: "The schedules, by name, a page at a time",
      description:
        "Pages of up to `limit` (100) schedules; pass `cursor` back as `cursor` while " +
        "`hasMore`. A topic-limited token sees the schedules of its topics only; a page reads " +
        "`limit` names and answers those it may see.",
      request: { query: ListQuery },
      responses: { 200: json(ScheduleList, "A page of schedules"), ...errors() },
    }),
    async (c) => {
      const { cursor, after, limit } = c.req.valid("query");
      if (cursor !== undefined && after !== undefined) {
        throw new DelayqError("invalid_request", "cursor and after are one parameter: give one");
      }
      const start = cursor ?? after;
      const page = await schedules.list(
        {
          ...(start === undefined ? {} : { after: start }),
          ...(limit === undefined ? {} : { limit }),
        },
        scopeOf(c),
        now(c),
      );
      const more = page.next === undefined ? {} : { cursor: page.next };
      return jsonBody(
        c,
        { schedules: page.schedules, ...more, hasMore: page.next !== undefined },
        200,
      );
    },
  );
}

/** A PUT without a body: the schedule's fields are required. */
export function requireBody(c: Context<AppEnv>): void {
  if (!c.req.header("content-type")) {
    throw new DelayqError("invalid_request", "Invalid request body: send the schedule as JSON");
  }
}
