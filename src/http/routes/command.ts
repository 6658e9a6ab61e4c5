// POST /v1/command: the JSON command protocol, one command or an array run in order.
import { createRoute, type OpenAPIHono, z } from "@hono/zod-openapi";
import { DelayqError } from "../../domain/errors";
import { MAX_WAIT_SECONDS } from "../../domain/schemas";
import type { Logger } from "../../log";
import { Command, type CommandResult, MAX_COMMANDS, runCommand } from "../../protocols/youzan";
import { requestJson } from "../body";
import type { AppEnv } from "../context";
import { toldOf } from "../errors";
import { jsonBody } from "../json";
import { documentedRoute } from "../route";
import { body, errors, json, SECURED } from "../schemas";

const Result = z
  .object({
    success: z.boolean().meta({ description: "Whether the command did what it asked." }),
    error: z.string().meta({ description: 'Empty on success, else "<code>: <message>"' }),
    id: z.string().optional().meta({ description: "The job's id (none when pop found nothing)." }),
    value: z.unknown().optional().meta({
      description: "pop: the job's body; get, touch, release, bury, reschedule, promote: the job.",
    }),
    created: z
      .boolean()
      .optional()
      .meta({ description: "add: false when the id existed and the stored job was kept" }),
    receipt: z
      .string()
      .optional()
      .meta({ description: "pop: the reservation's receipt, for finish/touch/release/bury" }),
  })
  .meta({
    id: "CommandResult",
    example: {
      success: true,
      error: "",
      id: "order-1042",
      value: { order: "1042" },
      receipt: "p1.mywpj0qw.mywpiww0.12nq13p",
    },
  });

export function commandRoutes(app: OpenAPIHono<AppEnv>, log: Logger): void {
  // Documented, not validated here: runCommand validates each command and answers in the envelope.
  app.openAPIRegistry.registerComponent(
    "schemas",
    "Command",
    z.toJSONSchema(Command, { io: "input", unrepresentable: "any" }) as never,
  );
  documentedRoute(
    app,
    createRoute({
      method: "post",
      path: "/v1/command",
      operationId: "runCommand",
      tags: ["command protocol"],
      security: SECURED,
      summary: "Run one command, or an array of up to 1000 in order",
      description:
        "The Youzan delay-queue protocol: `{command: add|pop|finish|delete|get|touch|release|" +
        "bury|reschedule|promote, ...}` → `{success, error, id, value}`. `pop` answers the job's id and body as " +
        "`id`/`value` (no `id` when nothing is ready). A failing command answers " +
        "`success: false` with HTTP 200, except when Redis failed every command (503; a " +
        "command whose answer was lost may still have run: retry with ids and receipts). The " +
        "pops of an array wait 20 s in all.",
      request: {
        body: body(z.unknown().meta({ description: "A Command, or an array of Commands" }), true),
      },
      responses: {
        200: json(z.union([Result, z.array(Result)]), "One result per command"),
        ...errors(),
        503: json(
          z.union([Result, z.array(Result)]),
          "Redis failed the command (or every command); one whose answer was lost may still have run: retry after Retry-After, with ids and receipts",
        ),
      },
    }),
    async (c) => {
      const input: unknown = requestJson(c, c.req.valid("json"));
      const signal = c.req.raw.signal;
      // A failure of Redis is logged with its detail; its result points at that line.
      const tell = toldOf(c, log);
      if (Array.isArray(input)) {
        if (input.length === 0 || input.length > MAX_COMMANDS) {
          throw new DelayqError(
            "invalid_request",
            `Invalid request body: give 1 to ${MAX_COMMANDS} commands`,
          );
        }
        const results: CommandResult[] = [];
        // The pops of an array wait 20 s in all, not 20 s each: one request is one long-poll.
        const waitUntil = Date.now() + MAX_WAIT_SECONDS * 1000;
        for (const command of input)
          results.push(await runCommand(c.get("queue"), command, signal, waitUntil, tell));
        if (results.every((result) => result.error.startsWith("redis_unavailable"))) {
          // Redis failed every command: a status that says so. Some may still have run (a
          // timeout does not say the script did not): retry with ids and receipts.
          c.header("Retry-After", "1");
          return jsonBody(c, results, 503);
        }
        return jsonBody(c, results, 200);
      }
      const result = await runCommand(c.get("queue"), input, signal, undefined, tell);
      if (result.error.startsWith("redis_unavailable")) {
        c.header("Retry-After", "1");
        return jsonBody(c, result, 503);
      }
      return jsonBody(c, result, 200);
    },
  );
}
