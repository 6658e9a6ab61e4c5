// Routes on topics: pop (long-poll), kick, stats, paging jobs by state, config, dead-letter purge.
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { DelayqError } from "../../domain/errors";
import type { AppEnv } from "../context";
import { jsonBody } from "../json";
import { documentedRoute } from "../route";
import {
  body,
  errors,
  JobList,
  json,
  KickBody,
  ListQuery,
  PopBody,
  PopResult,
  PurgeQuery,
  SECURED,
  TopicList,
  TopicParam,
  TopicStats,
  TopicsQuery,
} from "../schemas";
import { readTopics } from "../topic-cursors";
import { type ConfigRouteOptions, configRoutes, maskStats } from "./topic-config";

const tags = ["topics"];

export function topicRoutes(app: OpenAPIHono<AppEnv>, options: ConfigRouteOptions): void {
  configRoutes(app, options);
  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/topics/{topic}/pop",
      operationId: "pop",
      tags,
      security: SECURED,
      summary: "Reserve up to `count` ready jobs, optionally waiting up to `wait` seconds",
      description:
        "Each job comes with a `receipt` and is leased for its TTR. Due jobs and expired " +
        "leases are taken care of first, so no scheduler tick is needed. With `wait`, the " +
        "request returns as soon as a job is ready, or with `jobs: []` when the wait is over.",
      request: { params: TopicParam, body: body(PopBody, false) },
      responses: {
        200: json(PopResult, "The reserved jobs (maybe none), and what was finished first"),
        ...errors(403, 409),
      },
    }),
    async (c) => {
      const { topic } = c.req.valid("param");
      const { finish, ...options } = c.req.valid("json");
      const signal = lazySignal(c.req.raw);
      if (finish === undefined) {
        return jsonBody(c, { jobs: await c.get("queue").pop(topic, options, signal) }, 200);
      }
      const items = finish as { id: string; receipt?: string }[];
      return jsonBody(c, await c.get("queue").finishAndPop(topic, items, options, signal), 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/topics/{topic}/kick",
      operationId: "kick",
      tags,
      security: SECURED,
      summary: "Move dead jobs back to ready (attempts reset)",
      description: "By `ids`, or the `count` oldest; with neither, up to 1000.",
      request: { params: TopicParam, body: body(KickBody, false) },
      responses: {
        200: json(
          z.object({
            kicked: z.number().meta({ description: "Dead jobs made ready.", example: 3 }),
          }),
          "How many",
        ),
        ...errors(403),
      },
    }),
    async (c) => {
      const kicked = await c.get("queue").kick(c.req.valid("param").topic, c.req.valid("json"));
      return c.json({ kicked }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "delete",
      path: "/v1/topics/{topic}/dead",
      operationId: "deleteDead",
      tags,
      security: SECURED,
      summary: "Delete dead jobs, the `count` oldest (default and most: 1000)",
      request: { params: TopicParam, query: PurgeQuery },
      responses: {
        200: json(
          z.object({
            deleted: z.number().meta({ description: "Dead jobs deleted.", example: 100 }),
          }),
          "How many",
        ),
        ...errors(403),
      },
    }),
    async (c) => {
      const { count } = c.req.valid("query");
      const deleted = await c.get("queue").deleteDead(c.req.valid("param").topic, { count });
      return c.json({ deleted }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "get",
      path: "/v1/topics",
      operationId: "listTopics",
      tags,
      security: SECURED,
      summary: "List topics with their counts, by name",
      description:
        "Pages of up to `limit` (100) topics; pass `cursor` back as `cursor` while `hasMore`. " +
        "`after`, its former name, is still accepted.",
      request: { query: TopicsQuery },
      responses: { 200: json(TopicList, "A page of topics"), ...errors() },
    }),
    async (c) => {
      const { cursor, after, limit } = c.req.valid("query");
      if (cursor !== undefined && after !== undefined) {
        throw new DelayqError(
          "invalid_request",
          "cursor and after are one parameter (after is its former name): give one",
        );
      }
      const page = await readTopics(c.get("queue"), options.cursors, {
        after: cursor ?? after,
        limit,
      });
      return c.json({ ...page, topics: page.topics.map(maskStats) }, 200);
    },
  );

  documentedRoute(
    app,
    createRoute({
      method: "get",
      path: "/v1/topics/{topic}",
      operationId: "getTopic",
      tags,
      security: SECURED,
      summary: "A topic's counts per state, earliest due time and config",
      request: { params: TopicParam },
      responses: { 200: json(TopicStats, "The topic"), ...errors(403) },
    }),
    async (c) => c.json(maskStats(await c.get("queue").topic(c.req.valid("param").topic)), 200),
  );

  documentedRoute(
    app,
    createRoute({
      method: "get",
      path: "/v1/topics/{topic}/jobs",
      operationId: "listJobs",
      tags,
      security: SECURED,
      summary: "Page through a topic's jobs in one state (delayed, ready, reserved, dead)",
      description: "Pages of up to `limit` jobs; pass `cursor` back as `cursor` while `hasMore`.",
      request: { params: TopicParam, query: ListQuery },
      responses: { 200: json(JobList, "A page of jobs"), ...errors(403) },
    }),
    async (c) => {
      const page = await c.get("queue").list(c.req.valid("param").topic, c.req.valid("query"));
      return jsonBody(c, page, 200);
    },
  );
}

/**
 * The request's abort state, read only once a pop waits: reading `signal` on a request of
 * @hono/node-server builds an AbortController and its listeners (~1 % of a pop's CPU), which a
 * pop that finds its jobs at once never needs. A client gone before it is read reads as aborted.
 */
function lazySignal(request: Request): Pick<AbortSignal, "aborted"> {
  return {
    get aborted() {
      return request.signal.aborted;
    },
  };
}
