// The Youzan delay-queue design's JSON command protocol, on top of the queue.
import { z } from "zod";
import { clip, DelayqError, invalidRequest } from "../domain/errors";
import {
  AddJobFields,
  type AddJobInput,
  BuryInput,
  JobId,
  MAX_WAIT_SECONDS,
  ONE_DUE_TIME,
  oneDueTime,
  Receipt,
  ReleaseInput,
  TopicName,
  Ttr,
} from "../domain/schemas";
import type { DelayQueue } from "../queue";

const ID = JobId.meta({ description: "The job's id.", example: "order-1042" });
const RECEIPT = Receipt.optional().meta({
  description: "The receipt pop answered; one of an ended reservation is refused.",
  example: "p1.mywpj0qw.mywpiww0.12nq13p",
});
const commandName = <N extends string>(name: N) =>
  z.literal(name).meta({ description: "The command." });

const byId = <N extends string>(name: N) =>
  z.strictObject({ command: commandName(name), id: ID, receipt: RECEIPT });

/** One command. Field names are accepted as the design spelled them (`TTR`) and in lower case. */
export const Command = z.discriminatedUnion("command", [
  z
    .strictObject({
      command: commandName("add"),
      ...AddJobFields,
      TTR: Ttr.optional().meta({
        description: "Time to run, seconds: the design's spelling of `ttr`.",
        example: 60,
      }),
    })
    .refine(oneDueTime, ONE_DUE_TIME),
  z.strictObject({
    command: commandName("pop"),
    topic: TopicName.meta({ description: "The topic to take a job from.", example: "payments" }),
    wait: z.number().min(0).max(MAX_WAIT_SECONDS).optional().meta({
      description: "Seconds to wait for a job when none is ready (long-poll), up to 20.",
      example: 20,
    }),
  }),
  byId("finish"),
  byId("delete"),
  byId("get"),
  byId("touch"),
  byId("bury").extend({ error: BuryInput.shape.error }),
  byId("release").extend({ delay: ReleaseInput.shape.delay, error: ReleaseInput.shape.error }),
  z
    .strictObject({
      command: commandName("reschedule"),
      id: ID,
      delay: AddJobFields.delay,
      runAt: AddJobFields.runAt,
    })
    .refine(oneDueTime, ONE_DUE_TIME),
  z.strictObject({ command: commandName("promote"), id: ID }),
]);
export type Command = z.output<typeof Command>;

/** The answer to one command: `{success, error, id, value}` as the design has it. */
export type CommandResult = {
  success: boolean;
  /** Empty on success; otherwise `<error code>: <message>`. */
  error: string;
  id?: string;
  value?: unknown;
  /** add: false when the id existed and the stored job was kept. */
  created?: boolean;
  /** pop: the reservation's receipt. */
  receipt?: string;
};

export const MAX_COMMANDS = 1000;

/** An id of the caller's echoed in a failed result: whole when it could be valid, else cut. */
function clipId(id: string): string {
  return id.length <= 128 ? id : clip(id);
}

/** Runs one command. Failures become `success: false`; only a bug throws. */
export async function runCommand(
  queue: DelayQueue,
  input: unknown,
  signal?: AbortSignal,
  /** When every wait of the request ends, unix ms: the pops of an array share one long-poll. */
  waitUntil?: number,
  /** What the result tells of a failure (http/errors.ts toldOf). @default its message */
  tell: (error: DelayqError) => string = (error) => error.message,
): Promise<CommandResult> {
  const idOf = (value: unknown) =>
    typeof value === "object" &&
    value !== null &&
    typeof (value as { id?: unknown }).id === "string"
      ? { id: clipId((value as { id: string }).id) }
      : {};
  try {
    const parsed = Command.safeParse(input);
    if (!parsed.success) throw invalidRequest(parsed.error, "command");
    return await execute(queue, parsed.data, signal, waitUntil);
  } catch (error) {
    if (!(error instanceof DelayqError) || error.code === "internal_error") throw error;
    return { success: false, error: `${error.code}: ${tell(error)}`, ...idOf(input) };
  }
}

async function execute(
  queue: DelayQueue,
  command: Command,
  signal?: AbortSignal,
  waitUntil?: number,
): Promise<CommandResult> {
  const ok = (id: string, value?: unknown): CommandResult =>
    value === undefined
      ? { success: true, error: "", id }
      : { success: true, error: "", id, value };
  switch (command.command) {
    case "add": {
      const { command: _, TTR, ttr, ...rest } = command;
      if (TTR !== undefined && ttr !== undefined && TTR !== ttr) {
        throw new DelayqError("invalid_request", "Invalid command: TTR and ttr differ; give one");
      }
      const input: AddJobInput = { ...rest, ttr: TTR ?? ttr };
      // `created: false` when the id existed (an idempotent re-add): not a failure.
      const { job, created } = await queue.add(input);
      return { ...ok(job.id), created };
    }
    case "pop": {
      const left = waitUntil === undefined ? Infinity : Math.max(0, waitUntil - Date.now()) / 1000;
      const wait = Math.min(command.wait ?? 0, left);
      const [job] = await queue.pop(command.topic, { count: 1, wait }, signal);
      // The receipt is an extra field (old clients ignore it) so that a protocol-only consumer
      // can finish, touch, release or bury with it.
      return job ? { ...ok(job.id, job.body), receipt: job.receipt } : { success: true, error: "" };
    }
    case "finish":
      await queue.finish(command.id, { receipt: command.receipt });
      return ok(command.id);
    case "delete":
      await queue.delete(command.id);
      return ok(command.id);
    case "get":
      return ok(command.id, await queue.get(command.id));
    case "touch":
      return ok(command.id, await queue.touch(command.id, { receipt: command.receipt }));
    case "bury": {
      const { receipt, error } = command;
      return ok(command.id, await queue.bury(command.id, { receipt, error }));
    }
    case "release": {
      const { receipt, delay, error } = command;
      return ok(command.id, await queue.release(command.id, { receipt, delay, error }));
    }
    case "reschedule": {
      const { delay, runAt } = command;
      return ok(command.id, await queue.reschedule(command.id, { delay, runAt }));
    }
    case "promote":
      return ok(command.id, await queue.promote(command.id));
  }
}
