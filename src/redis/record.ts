// The job record's format, named once: RECORD_FIELDS generates the Lua codec and the TS decoder.
import { DelayqError } from "../domain/errors";
import { RawJson } from "../domain/raw-json";
import type { Backoff, Job, JobState } from "../domain/schemas";
import { SCHEDULE_MARKERS } from "./keys";

/**
 * A job record is one string, `<meta>\n<body JSON>`. The body is the client's JSON text, stored
 * and returned byte for byte (Lua never parses it). The meta is positional: these fields in this
 * order, `|`-separated, an empty field for an unset one (ids, topics and receipts cannot contain
 * `|`), then the backoff spec as JSON (last, so that it may contain anything). Times are unix ms.
 * e.g. `w|order-42|pay|1800000005000|1800000000000|30000|0|10||||||||||"wechatpay"`.
 * Positional rather than JSON because a delayed job's record is most of what it costs in memory:
 * this is about 60 bytes shorter per job than the same meta as a JSON object.
 */
export const RECORD_FIELDS = [
  /** One of RECORD_STATES, stored as its one-letter code. */
  { name: "state", type: "state" },
  { name: "id", type: "text" },
  { name: "topic", type: "text" },
  /** When the job is (or was) due. */
  { name: "due", type: "number" },
  { name: "createdAt", type: "number" },
  /** Time-to-run, ms. */
  { name: "ttr", type: "number" },
  /** Reservations so far. */
  { name: "attempts", type: "number" },
  { name: "maxAttempts", type: "number" },
  { name: "deadline", type: "number" },
  /** End of the current reservation. */
  { name: "leaseEnd", type: "number" },
  /** The current (or last) reservation's receipt. */
  { name: "receipt", type: "text" },
  /** When it finished, died or was deleted. */
  { name: "endedAt", type: "number" },
  /** Why it died: attempts | deadline | buried. */
  { name: "deadReason", type: "text" },
  /** Push topics: the last delivery's HTTP status (0: no answer) and time. */
  { name: "lastStatus", type: "number" },
  { name: "lastAt", type: "number" },
  /**
   * Why the job last failed (a release's or bury's `error`, a failed delivery's):
   * `<at>:<attempt>:<message>`, the message escaped by errorField. Records of earlier versions
   * hold a delivery's error alone, its time being lastAt's (readLastError).
   */
  { name: "lastError", type: "text" },
  /** Push via QStash: the message the current reservation was published as. */
  { name: "messageId", type: "text" },
] as const;

/**
 * Text fit for a record's field (a delivery's error): the record is `|`-separated lines, so no
 * `|` or line break, and at most 200 characters.
 */
export function recordText(text: string): string {
  return text.replace(/[|\r\n]+/g, " ").slice(0, 200);
}

/**
 * A failure's message as the record's lastError keeps it: `%`, `|`, CR and LF written as
 * `%25`, `%7C`, `%0D`, `%0A` (so that any text fits a `|`-separated line and reads back whole).
 * Lua never reads it: the scripts prefix the time and attempt and store it as given.
 */
export function errorField(message: string): string {
  return message.replace(
    /[%|\r\n]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`,
  );
}

/** The lastError a job shows, from its record's meta (undefined: it never failed with one). */
export function readLastError(meta: RecordMeta): LastError | undefined {
  const field = meta.lastError;
  if (field === undefined) return undefined;
  const parsed = /^(\d+):(\d+):/.exec(field);
  if (!parsed) {
    // An earlier version's: a delivery's error alone, written when that delivery ended.
    return { message: field, at: meta.lastAt ?? meta.createdAt, attempt: meta.attempts };
  }
  return {
    message: field
      .slice(parsed[0].length)
      .replace(/%(25|7C|0D|0A)/g, (_, hex: string) =>
        String.fromCharCode(Number.parseInt(hex, 16)),
      ),
    at: Number(parsed[1]),
    attempt: Number(parsed[2]),
  };
}

/** Why a job last failed, as a client sees it. */
export type LastError = { message: string; at: number; attempt: number };

/**
 * Stored states and their codes. A waiting job is reported "ready" once due, "delayed" before.
 */

export const RECORD_STATES = {
  waiting: "w",
  reserved: "r",
  finished: "f",
  dead: "d",
  deleted: "x",
} as const;

type Field = (typeof RECORD_FIELDS)[number];
type FieldValue<F extends Field> = F["type"] extends "number"
  ? number
  : F["type"] extends "state"
    ? keyof typeof RECORD_STATES
    : string;

/** A record's meta as the scripts see it (unset fields absent). */
export type RecordMeta = { [F in Field as F["name"]]?: FieldValue<F> } & {
  state: keyof typeof RECORD_STATES;
  id: string;
  topic: string;
  due: number;
  createdAt: number;
  ttr: number;
  attempts: number;
  maxAttempts: number;
  deadReason?: "attempts" | "deadline" | "buried";
  backoff?: Backoff;
};

const STATE_OF = Object.fromEntries(
  Object.entries(RECORD_STATES).map(([state, code]) => [code, state]),
) as Record<string, RecordMeta["state"]>;

/** encode's operands: each field's value or "" when unset, the state as its code, `|` between. */
const ENCODE_PARTS = [
  ...RECORD_FIELDS.map((f) =>
    f.type === "state" ? "CODE_OF[meta.state]" : `(meta.${f.name} or "")`,
  ),
  '(meta.backoff or "")',
].join(' .. "|" .. ');

/** decode's locals, one a field: `f1, f2, ...`. */
const DECODE_CAPTURES = RECORD_FIELDS.map((_, i) => `f${i + 1}`).join(", ");

/** decode's table: each field from its capture, a number or text, unset when empty. */
const DECODE_FIELDS = RECORD_FIELDS.map((f, i) => {
  const capture = `f${i + 1}`;
  if (f.type === "state") return `${f.name} = STATE_OF[${capture}]`;
  if (f.type === "number") return `${f.name} = tonumber(${capture})`;
  return `${f.name} = ${capture} ~= "" and ${capture} or nil`;
}).join(", ");

/**
 * Lua: the codec (`encode(meta)`, `decode(raw)` → meta, body) and the record's load and save,
 * generated from RECORD_FIELDS. Needs `rcall`, `key` and RETENTION in scope.
 */
export const LUA_RECORD = `
-- The record format (src/redis/record.ts): positional meta fields, the backoff JSON, the body.
-- The meta fields, each up to its "|", then the backoff up to the line's end; the body's position.
local DECODE_PATTERN = "^${"([^|]*)|".repeat(RECORD_FIELDS.length)}([^\\n]*)\\n()"
local STATE_OF = {${Object.entries(STATE_OF)
  .map(([code, state]) => `${code} = "${state}"`)
  .join(", ")}}
local CODE_OF = {${Object.entries(RECORD_STATES)
  .map(([state, code]) => `${state} = "${code}"`)
  .join(", ")}}

-- One concatenation, written out field by field: a loop filling a table for table.concat cost
-- about three times as much per record (bench/call-tail.ts: most of an add's time per job). A
-- number joins as tostring() would write it (both use "%.14g").
local function encode(meta)
  return ${ENCODE_PARTS}
end

-- One match for the whole meta line (a find and a sub per field took ~1.5x as long), its
-- captures put straight into the table; an empty field is an unset one.
local function decode(raw)
  local ${DECODE_CAPTURES}, backoff, bodyAt = string.match(raw, DECODE_PATTERN)
  if not bodyAt then error("delayq: a job record in Redis is not in delayq's format") end
  local meta = {${DECODE_FIELDS}}
  if backoff ~= "" then meta.backoff = backoff end
  return meta, string.sub(raw, bodyAt)
end

local function load(id)
  local raw = rcall("GET", key.job(id))
  if not raw then return nil end
  return decode(raw)
end

-- On a partitioned deployment, a job's id index entry expires with its ended record: here when
-- the id's partition is this one, else through key.ended (redis/routing.ts: forgetEnded).
local function indexEnds(id)
  if PARTS == 1 then return end
  if idPartition(id) == PART then
    rcall("PEXPIRE", key.jobIndex(id), RETENTION)
  elseif rcall("RPUSH", key.ended, id) == 1 then
    rcall("ZADD", key.schedule, "LT", NOW, "${SCHEDULE_MARKERS.ended}")
  end
end

-- Writes a record and returns it; finished and deleted records expire after RETENTION.
local function save(id, meta, body)
  local raw = encode(meta) .. "\\n" .. body
  if meta.state == "finished" or meta.state == "deleted" then
    rcall("SET", key.job(id), raw, "PX", RETENTION)
    indexEnds(id)
  else
    rcall("SET", key.job(id), raw)
  end
  return raw
end
`;

/** The state a client sees: a waiting job is ready once due, delayed before. */
export function stateOf(meta: Pick<RecordMeta, "state" | "due">, now: number): JobState {
  if (meta.state === "waiting") return meta.due <= now ? "ready" : "delayed";
  return meta.state;
}

/** Parses a record's meta line, as the Lua `encode` writes it. */
export function decodeMeta(line: string): RecordMeta {
  const meta: Record<string, unknown> = {};
  let pos = 0;
  for (const field of RECORD_FIELDS) {
    const bar = line.indexOf("|", pos);
    if (bar < 0) throw new DelayqError("internal_error", "Unexpected job record from Redis");
    if (bar > pos) {
      const value = line.slice(pos, bar);
      meta[field.name] = field.type === "number" ? Number(value) : value;
    }
    pos = bar + 1;
  }
  meta.state = STATE_OF[meta.state as string];
  if (pos < line.length) meta.backoff = JSON.parse(line.slice(pos));
  return meta as RecordMeta;
}

/** Splits a raw record into its meta and its body's JSON text. */
export function splitRecord(raw: unknown): { meta: RecordMeta; body: string } {
  if (typeof raw !== "string") {
    throw new DelayqError("internal_error", `Unexpected job record from Redis: ${typeof raw}`);
  }
  const cut = raw.indexOf("\n");
  return { meta: decodeMeta(raw.slice(0, cut)), body: raw.slice(cut + 1) };
}

/**
 * Decodes a record into the Job a client sees, with its state as of `now`. With `rawBody`, the
 * body is the stored JSON text as a RawJson instead of a parsed value.
 */
export function decodeRecord(raw: unknown, now: number, rawBody = false): Job {
  const { meta, body } = splitRecord(raw);
  const job: Job = {
    id: meta.id,
    topic: meta.topic,
    state: stateOf(meta, now),
    body: rawBody ? new RawJson(body) : JSON.parse(body),
    dueAt: meta.due,
    ttr: meta.ttr / 1000,
    attempts: meta.attempts,
    maxAttempts: meta.maxAttempts,
    createdAt: meta.createdAt,
  };
  if (meta.backoff !== undefined) job.backoff = meta.backoff;
  if (meta.deadline !== undefined) job.deadline = meta.deadline;
  if (meta.state === "reserved") {
    job.reservedUntil = meta.leaseEnd;
    job.receipt = meta.receipt;
  }
  if (meta.endedAt !== undefined) job.endedAt = meta.endedAt;
  if (meta.deadReason !== undefined) job.deadReason = meta.deadReason;
  const lastError = readLastError(meta);
  if (lastError !== undefined) job.lastError = lastError;
  if (meta.lastAt !== undefined) {
    job.lastDelivery = { status: meta.lastStatus ?? 0, at: meta.lastAt };
    // The delivery's own error: the failure recorded when (and in the attempt) it ended.
    if (lastError?.at === meta.lastAt && lastError.attempt === meta.attempts) {
      job.lastDelivery.error = lastError.message;
    }
  }
  return job;
}
