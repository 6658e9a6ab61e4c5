// Reads the job records the scripts write: `<meta JSON>\n<body JSON>`.
import { DelayqError } from "../domain/errors";
import type { Backoff, Job, JobState } from "../domain/schemas";

/** A record's meta, as lib.ts documents it (times in unix ms). */
export type RecordMeta = {
  i: string;
  t: string;
  s: "waiting" | "reserved" | "finished" | "dead" | "deleted";
  d: number;
  r: number;
  a: number;
  m: number;
  b?: Backoff;
  x?: number;
  c: number;
  u?: number;
  k?: string;
  e?: number;
  w?: "attempts" | "deadline" | "buried";
};

export function stateOf(meta: Pick<RecordMeta, "s" | "d">, now: number): JobState {
  if (meta.s === "waiting") return meta.d <= now ? "ready" : "delayed";
  return meta.s;
}

/** Decodes a record into the Job a client sees, with its state as of `now`. */
export function decodeRecord(raw: unknown, now: number): Job {
  if (typeof raw !== "string") {
    throw new DelayqError("internal_error", `Unexpected job record from Redis: ${typeof raw}`);
  }
  const cut = raw.indexOf("\n");
  const meta = JSON.parse(raw.slice(0, cut)) as RecordMeta;
  const job: Job = {
    id: meta.i,
    topic: meta.t,
    state: stateOf(meta, now),
    body: JSON.parse(raw.slice(cut + 1)),
    dueAt: meta.d,
    ttr: meta.r / 1000,
    attempts: meta.a,
    maxAttempts: meta.m,
    createdAt: meta.c,
  };
  if (meta.b !== undefined) job.backoff = meta.b;
  if (meta.x !== undefined) job.deadline = meta.x;
  if (meta.s === "reserved") {
    job.reservedUntil = meta.u;
    job.receipt = meta.k;
  }
  if (meta.e !== undefined) job.endedAt = meta.e;
  if (meta.w !== undefined) job.deadReason = meta.w;
  return job;
}
