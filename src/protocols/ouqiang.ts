// ouqiang/delay-queue's HTTP API (push, pop, finish, delete, get) on top of the queue.
import { z } from "zod";
import { clip, DelayqError, type ErrorCode, invalidRequest } from "../domain/errors";
import { RawJson } from "../domain/raw-json";
import type { Job } from "../domain/schemas";
import {
  JobId,
  MAX_DELAY_SECONDS,
  MAX_TTR_SECONDS,
  MAX_WAIT_SECONDS,
  Receipt,
  TopicName,
} from "../domain/schemas";
import type { DelayQueue } from "../queue";

/** The endpoints, as ouqiang names them (`/push`, `/pop`, ...). */
export const OUQIANG_ENDPOINTS = ["push", "pop", "finish", "delete", "get"] as const;
export type OuqiangEndpoint = (typeof OUQIANG_ENDPOINTS)[number];

/**
 * ouqiang's answer: always `{code, message, data}`, code 0 on success and 1 on failure. delayq
 * adds `error`, its stable error code, on failures (ouqiang's clients ignore unknown fields).
 */
export type OuqiangEnvelope = {
  code: 0 | 1;
  message: string;
  data: unknown;
  error?: ErrorCode;
};

/** ouqiang's success messages, kept byte for byte: scripts print and sometimes compare them. */
export const PUSHED = "添加成功";
export const DONE = "操作成功";

/** What `/pop` answers when a job came (`receipt` is delayq's addition). */
export type OuqiangPopped = { id: string; body: string; receipt?: string };

/** What `/get` answers for a live job (`state` is delayq's addition). */
export type OuqiangJob = {
  topic: string;
  id: string;
  /** When the job is (or was) due, unix seconds: ouqiang stores the due time in `delay`. */
  delay: number;
  ttr: number;
  body: string;
  state: Job["state"];
};

// ouqiang's Go server trims ids and topics (strings.TrimSpace) before using them.
const TrimmedId = z.string().trim().pipe(JobId);
const TrimmedTopic = z.string().trim().pipe(TopicName);

const PushRequest = z.object({
  topic: TrimmedTopic,
  id: TrimmedId,
  /** Whole seconds from now. ouqiang refuses 0; delayq takes it as "ready now". */
  delay: z.number().int().min(0).max(MAX_DELAY_SECONDS).default(0),
  /** Whole seconds; absent: the topic's default (ouqiang requires it). */
  ttr: z.number().int().min(1).max(MAX_TTR_SECONDS).optional(),
  /** The client's string, kept as is (ouqiang takes a string; JSON is sent encoded in it). */
  body: z
    .string({ error: "must be a string (ouqiang's body is a string: JSON-encode structured data)" })
    .default(""),
});

const PopRequest = z.object({
  /** One topic, or several separated by commas, tried in the order given. */
  topic: z.string(),
  /** delayq's addition: seconds to wait for a job (ouqiang always waits 178 s). */
  wait: z.number().min(0).max(MAX_WAIT_SECONDS).default(MAX_WAIT_SECONDS),
});

const IdRequest = z.object({ id: TrimmedId });
const FinishRequest = IdRequest.extend({ receipt: Receipt.optional() });

const FIELDS: Record<OuqiangEndpoint, readonly string[]> = {
  push: ["topic", "id", "delay", "ttr", "body"],
  pop: ["topic", "wait"],
  finish: ["id", "receipt"],
  delete: ["id"],
  get: ["id"],
};

/**
 * Runs one request of ouqiang's API. `input` is the request's parsed JSON. Failures a client
 * can cause become `code: 1` envelopes; anything else (a bug) is thrown.
 */
export async function runOuqiang(
  queue: DelayQueue,
  endpoint: OuqiangEndpoint,
  input: unknown,
  signal?: AbortSignal,
  /** What the envelope tells of a failure (http/errors.ts toldOf). @default its message */
  tell?: (error: DelayqError) => string,
): Promise<OuqiangEnvelope> {
  try {
    const fields = goFields(input, FIELDS[endpoint]);
    switch (endpoint) {
      case "push":
        await push(queue, parse(PushRequest, fields));
        return success(PUSHED, null);
      case "pop": {
        const { topic, wait } = parse(PopRequest, fields);
        const job = await popAny(queue, topicsOf(topic), wait, signal);
        return success(DONE, job ? popped(job) : null);
      }
      case "finish":
        await finish(queue, parse(FinishRequest, fields));
        return success(DONE, null);
      case "delete":
        await ignoreMissing(queue.delete(parse(IdRequest, fields).id));
        return success(DONE, null);
      case "get":
        return success(DONE, await getJob(queue, parse(IdRequest, fields).id));
    }
  } catch (error) {
    if (!(error instanceof DelayqError) || error.code === "internal_error") throw error;
    return failure(error, tell);
  }
}

export function success(message: string, data: unknown): OuqiangEnvelope {
  return { code: 0, message, data };
}

export function failure(
  error: DelayqError,
  tell: (error: DelayqError) => string = (e) => e.message,
): OuqiangEnvelope {
  return { code: 1, message: tell(error), data: null, error: error.code };
}

/**
 * The request's fields as Go's encoding/json reads them into a struct: a key matches exactly or,
 * failing that, in any case; unknown keys are ignored; `null` leaves a field unset.
 */
function goFields(input: unknown, names: readonly string[]): Record<string, unknown> {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new DelayqError(
      "invalid_request",
      `Invalid request body: must be a JSON object with the fields ${names.join(", ")}`,
    );
  }
  const record = input as Record<string, unknown>;
  const fields: Record<string, unknown> = {};
  for (const name of names) {
    const key = name in record ? name : Object.keys(record).find((k) => k.toLowerCase() === name);
    const value = key === undefined ? undefined : record[key];
    if (value !== undefined && value !== null) fields[name] = value;
  }
  return fields;
}

function parse<S extends z.ZodType>(schema: S, fields: Record<string, unknown>): z.output<S> {
  const result = schema.safeParse(fields);
  if (!result.success) throw invalidRequest(result.error, "request body");
  return result.data;
}

/**
 * The most topics one pop may name: each is long-polled on its own, so a request naming 3,000
 * cost 3,000 pops a poll interval.
 */
export const MAX_POP_TOPICS = 20;

/** `"a, b,,a"` → `["a", "b"]`: trimmed, empty names dropped, each topic once, in order. */
export function topicsOf(text: string): string[] {
  const topics = [...new Set(text.split(",").map((part) => part.trim()))].filter(Boolean);
  if (topics.length === 0) {
    throw new DelayqError(
      "invalid_request",
      "Invalid request body: topic: name at least one topic",
    );
  }
  if (topics.length > MAX_POP_TOPICS) {
    throw new DelayqError(
      "invalid_request",
      `Invalid request body: topic: name at most ${MAX_POP_TOPICS} topics (${topics.length} given); run more consumers instead`,
    );
  }
  for (const topic of topics) {
    const checked = TopicName.safeParse(topic);
    if (!checked.success) {
      throw new DelayqError(
        "invalid_request",
        `Invalid request body: topic: "${clip(String(topic))}" ${checked.error.issues[0]?.message}`,
      );
    }
  }
  return topics;
}

/**
 * ouqiang's push overwrites whatever job has the id. delayq replaces it too, but never a job a
 * consumer holds: that one is first given back (released to wait the new delay), then replaced,
 * so that a crash between the two still leaves it to be delivered.
 */
async function push(queue: DelayQueue, job: z.output<typeof PushRequest>): Promise<void> {
  const input = { topic: job.topic, id: job.id, delay: job.delay, ttr: job.ttr, body: job.body };
  try {
    await queue.add({ ...input, replace: true });
  } catch (error) {
    if (!(error instanceof DelayqError) || error.code !== "job_reserved") throw error;
    try {
      // At least a second, so no consumer takes it between the two steps.
      await queue.release(job.id, { delay: Math.max(job.delay, 1) });
    } catch (released) {
      // Finished or deleted in the meantime: nothing is held any more, the add may go ahead.
      const gone =
        released instanceof DelayqError && /^(job_not_found|not_reserved)$/.test(released.code);
      if (!gone) throw released;
    }
    await queue.add({ ...input, replace: true });
  }
}

/**
 * ouqiang's finish deletes the job whatever its state. delayq finishes it when it is reserved
 * (or checks the receipt when one is given); a job that is not reserved is deleted, so that it is
 * not delivered again, as ouqiang would have it.
 */
async function finish(queue: DelayQueue, request: z.output<typeof FinishRequest>): Promise<void> {
  try {
    await queue.finish(request.id, { receipt: request.receipt });
  } catch (error) {
    if (!(error instanceof DelayqError)) throw error;
    if (error.code === "job_not_found") return;
    if (error.code !== "not_reserved" || request.receipt !== undefined) throw error;
    await ignoreMissing(queue.delete(request.id));
  }
}

/** ouqiang answers success for ids it does not know (a Redis DEL of nothing). */
async function ignoreMissing(operation: Promise<unknown>): Promise<void> {
  try {
    await operation;
  } catch (error) {
    if (!(error instanceof DelayqError) || error.code !== "job_not_found") throw error;
  }
}

/** ouqiang's `/get`: the job, or null when there is none (finished and deleted jobs included). */
async function getJob(queue: DelayQueue, id: string): Promise<OuqiangJob | null> {
  let job: Job;
  try {
    job = await queue.get(id);
  } catch (error) {
    if (error instanceof DelayqError && error.code === "job_not_found") return null;
    throw error;
  }
  if (job.state === "finished" || job.state === "deleted") return null;
  return {
    topic: job.topic,
    id: job.id,
    delay: Math.floor(job.dueAt / 1000),
    ttr: job.ttr,
    body: bodyText(job.body),
    state: job.state,
  };
}

function popped(job: Job): OuqiangPopped {
  const out: OuqiangPopped = { id: job.id, body: bodyText(job.body) };
  if (job.receipt !== undefined) out.receipt = job.receipt;
  return out;
}

/**
 * A job's body as ouqiang's string: a string body is itself; any other (a job added through
 * /v1 with a JSON body) is its JSON text as the client sent it; no body is "".
 */
export function bodyText(body: unknown): string {
  if (body instanceof RawJson) {
    const text = body.text.trim();
    if (text.startsWith('"')) return JSON.parse(text) as string;
    return text === "null" ? "" : text;
  }
  if (typeof body === "string") return body;
  return body === undefined || body === null ? "" : JSON.stringify(body);
}

/**
 * One job from the first of `topics` that has one, like ouqiang's BLPOP over several lists.
 * Nothing ready: waits up to `wait` seconds for any of them. Several topics are long-polled at
 * once; when two hand out a job at the same moment, the one later in the list is given back at
 * once, as if it had not been taken (its attempt not counted), so no job waits out a lease nobody
 * holds.
 */
export async function popAny(
  queue: DelayQueue,
  topics: readonly string[],
  wait: number,
  signal?: AbortSignal,
): Promise<Job | undefined> {
  for (const topic of topics) {
    const [job] = await queue.pop(topic, { count: 1, wait: 0 }, signal);
    if (job) return job;
  }
  if (wait === 0 || signal?.aborted) return undefined;
  if (topics.length === 1) {
    const [job] = await queue.pop(topics[0] as string, { count: 1, wait }, signal);
    return job;
  }
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  signal?.addEventListener("abort", onAbort);
  const found: (Job | undefined)[] = [];
  let failed: unknown;
  try {
    await Promise.all(
      topics.map(async (topic, i) => {
        try {
          const [job] = await queue.pop(topic, { count: 1, wait }, stop.signal);
          found[i] = job;
          if (job) stop.abort();
        } catch (error) {
          failed ??= error;
          stop.abort();
        }
      }),
    );
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
  const jobs = found.filter((job): job is Job => job !== undefined);
  const [first, ...extra] = jobs;
  await Promise.allSettled(
    extra.map((job) => queue.release(job.id, { receipt: job.receipt, undo: true })),
  );
  if (!first && failed !== undefined) throw failed;
  return first;
}
