// Reads the job records the scripts write: `<meta>\n<body JSON>` (the format is in lua/lib.ts).
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
  /** "1" when the job was deleted while its id sat in a slot list. */
  l?: string;
};

export function stateOf(meta: Pick<RecordMeta, "s" | "d">, now: number): JobState {
  if (meta.s === "waiting") return meta.d <= now ? "ready" : "delayed";
  return meta.s;
}

const STATES: Record<string, RecordMeta["s"]> = {
  w: "waiting",
  r: "reserved",
  f: "finished",
  d: "dead",
  x: "deleted",
};
const TEXT_FIELDS = new Set(["s", "i", "t", "k", "w", "l"]);
/** The meta's fields in the order lib.ts writes them; the backoff spec (JSON) comes last. */
const FIELDS = ["s", "i", "t", "d", "c", "r", "a", "m", "x", "u", "k", "e", "w", "l"] as const;

/** Parses a record's meta line, as lib.ts's `encode` writes it. */
export function decodeMeta(line: string): RecordMeta {
  const meta: Record<string, unknown> = {};
  let pos = 0;
  for (const field of FIELDS) {
    const bar = line.indexOf("|", pos);
    if (bar < 0) throw new DelayqError("internal_error", "Unexpected job record from Redis");
    if (bar > pos) {
      const value = line.slice(pos, bar);
      meta[field] = TEXT_FIELDS.has(field) ? value : Number(value);
    }
    pos = bar + 1;
  }
  meta.s = STATES[meta.s as string];
  if (pos < line.length) meta.b = JSON.parse(line.slice(pos));
  return meta as RecordMeta;
}

/** Decodes a record into the Job a client sees, with its state as of `now`. */
export function decodeRecord(raw: unknown, now: number): Job {
  if (typeof raw !== "string") {
    throw new DelayqError("internal_error", `Unexpected job record from Redis: ${typeof raw}`);
  }
  const cut = raw.indexOf("\n");
  const meta = decodeMeta(raw.slice(0, cut));
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
