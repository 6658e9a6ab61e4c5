// Adding jobs: validating each one into the add script's fields, and packing them into calls.
import { DelayqError, parseInput } from "../domain/errors";
import { RawJson } from "../domain/raw-json";
import type { AddResult, BatchItemResult } from "../domain/results";
import { AddJobInput, MAX_DELAY_SECONDS } from "../domain/schemas";
import { decodeRecord } from "../redis/record";
import type { AddReply } from "../redis/replies";
import type { ScriptRunner } from "../redis/runner";
import { scriptError } from "./errors";

/**
 * Bytes of script arguments per add request before a batch is split (Upstash takes 10 MB per
 * request), counted as they travel: UTF-8, inside the JSON of the REST request.
 */
const MAX_ADD_ARG_BYTES = 4 * 1024 * 1024;
/**
 * Jobs per add script call: a 1000-job batch is ten calls pipelined in one request. At 250 a
 * call, 1M jobs added in batches of 1000 had 97-150 calls over 10 ms (median 5.4 ms on a slow day
 * of the shared machine); at 100, 21-23 (median 2.2 ms), for one more EVALSHA and MGET per 100 jobs
 * (bench/call-tail.ts). With the record's codec writing one concatenation, 11 (median 1.5 ms).
 */
export const ADD_SLICE = 100;

const utf8 = new TextEncoder();

/**
 * Validates one add and turns it into the add script's ARGV fields (lua/scripts/add.ts).
 * `allow` checks the caller may act on the topic; `what` names the item in messages.
 */
export function prepareAdd(
  input: unknown,
  now: number,
  maxBodyBytes: number,
  allow: (topic: string) => void,
  what = "job",
): string[] {
  const job = parseInput(AddJobInput, input, what);
  allow(job.topic);
  const body = toJson(job.body, what);
  // UTF-8 takes at most 3 bytes per UTF-16 code unit: most bodies need no encoding to be measured.
  if (body.length * 3 > maxBodyBytes) {
    const size = utf8.encode(body).length;
    if (size > maxBodyBytes) {
      throw new DelayqError(
        "payload_too_large",
        `${what}.body is ${size} bytes of JSON; the limit is ${maxBodyBytes}`,
      );
    }
  }
  const due = job.runAt ?? now + Math.round((job.delay ?? 0) * 1000);
  if (due > now + MAX_DELAY_SECONDS * 1000) {
    throw new DelayqError("invalid_request", `${what}.runAt: must be at most a year from now`);
  }
  if (job.deadline !== undefined && job.deadline < due) {
    throw new DelayqError(
      "invalid_request",
      `${what}.deadline: must not be before the job is due (${new Date(due).toISOString()})`,
    );
  }
  return [
    job.id ?? crypto.randomUUID(),
    job.topic,
    // A delay is counted by the script from its own now (Redis's clock), not the caller's.
    job.runAt === undefined ? `+${Math.round((job.delay ?? 0) * 1000)}` : String(due),
    job.ttr === undefined ? "" : String(job.ttr * 1000),
    job.maxAttempts === undefined ? "" : String(job.maxAttempts),
    job.backoff === undefined ? "" : JSON.stringify(job.backoff),
    job.deadline === undefined ? "" : String(job.deadline),
    job.replace ? "1" : "",
    body,
  ];
}

/**
 * Validates each item of a batch on its own: the add script's fields of the valid ones with
 * their positions in the batch, and the results list with an error at each invalid one's.
 */
export function prepareBatch(
  inputs: readonly unknown[],
  now: number,
  maxBodyBytes: number,
  allow: (topic: string) => void,
): { results: BatchItemResult[]; prepared: string[][]; positions: number[] } {
  const results: BatchItemResult[] = new Array(inputs.length);
  const prepared: string[][] = [];
  const positions: number[] = [];
  inputs.forEach((input, i) => {
    try {
      prepared.push(prepareAdd(input, now, maxBodyBytes, allow, `jobs.${i}`));
      positions.push(i);
    } catch (error) {
      if (!(error instanceof DelayqError)) throw error;
      results[i] = { error: error.toJSON() };
    }
  });
  return { results, prepared, positions };
}

/**
 * Runs the add script over prepared jobs: slices of at most ADD_SLICE jobs, so that no script call
 * holds Redis for long, sent together so that the client pipelines them into one request
 * (batches over 4 MiB of arguments take more requests: Upstash takes 10 MB per request).
 * Slices run in order, so an id repeated across slices sees the earlier write.
 */
export async function runAdds(
  scripts: ScriptRunner,
  defaults: readonly [ttr: string, maxAttempts: string, backoff: string],
  prepared: readonly string[][],
  now: number | undefined,
  rawBodies = false,
): Promise<{ results: BatchItemResult[]; pushed: PushedTopic[] }> {
  const requests: string[][][][] = [[[]]];
  // When the most the fields could take on the wire fits in one request (most adds, single ones
  // always), no field is measured: encoding each one cost an add as much as its validation.
  const measure = mostWireBytes(prepared) > MAX_ADD_ARG_BYTES;
  let bytes = 0;
  for (const fields of prepared) {
    const size = measure ? fields.reduce((sum, field) => sum + wireBytes(field), 0) : 0;
    let request = requests[requests.length - 1] as string[][][];
    if (bytes + size > MAX_ADD_ARG_BYTES && bytes > 0) {
      request = [[]];
      requests.push(request);
      bytes = 0;
    }
    let slice = request[request.length - 1] as string[][];
    if (slice.length >= ADD_SLICE) {
      slice = [];
      request.push(slice);
    }
    slice.push(fields);
    bytes += size;
  }
  const results: BatchItemResult[] = [];
  const pushed: PushedTopic[] = [];
  for (const request of requests) {
    const replies = await Promise.all(
      request.map((slice) => scripts.runTimed("add", now, addArgs(defaults, slice))),
    );
    for (const { reply, now: at } of replies) {
      for (const { code, record } of reply.jobs) {
        results.push(addResult(code, record, at, rawBodies));
      }
      pushed.push(...reply.pushed);
    }
  }
  return { results, pushed };
}

/**
 * The add script's arguments for a slice of prepared jobs: the defaults, then each job's fields.
 * With concat: `[...defaults, ...slice.flat()]` took ~117 µs for a 100-job slice against ~4
 * (bench/add-steps.ts), 5 % of the samples in a profile of batch adds.
 */
export function addArgs(
  defaults: readonly [ttr: string, maxAttempts: string, backoff: string],
  slice: readonly (readonly string[])[],
): string[] {
  return defaults.concat(...slice);
}

/** A push topic an add wrote to, and its earliest due job written (for prompt delivery). */
export type PushedTopic = AddReply["pushed"][number];

function addResult(
  code: AddReply["jobs"][number]["code"],
  raw: string,
  now: number,
  rawBodies: boolean,
): BatchItemResult {
  const job = decodeRecord(raw, now, rawBodies);
  if (code === "ok" || code === "replaced") return { created: true, job } satisfies AddResult;
  if (code === "duplicate") return { created: false, job };
  return { error: scriptError(code, { id: job.id }).toJSON() };
}

/** The bytes an argument takes in the REST request: its JSON string, in UTF-8, and a comma. */
function wireBytes(field: string): number {
  return utf8.encode(JSON.stringify(field)).length + 1;
}

/**
 * The most bytes the fields could take in the REST request, without encoding them: a UTF-16 code
 * unit takes at most 6 bytes as JSON (a control character or a lone surrogate escaped as \uXXXX;
 * other characters at most 3 in UTF-8), plus the quotes and a comma per field.
 */
export function mostWireBytes(prepared: readonly (readonly string[])[]): number {
  let units = 0;
  let fields = 0;
  for (const job of prepared) {
    for (const field of job) units += field.length;
    fields += job.length;
  }
  return units * 6 + fields * 3;
}

/**
 * The body's JSON text (undefined is null): as received when the HTTP layer kept it (RawJson),
 * else serialized; a value JSON cannot hold is invalid_request.
 */
function toJson(body: unknown, what: string): string {
  if (body instanceof RawJson) return body.text;
  try {
    return JSON.stringify(body ?? null);
  } catch (error) {
    throw new DelayqError(
      "invalid_request",
      `${what}.body: must be a JSON value (${error instanceof Error ? error.message : error})`,
    );
  }
}
