// Script codes to typed errors, in one exhaustive function: every caller sees the same error for
// the same cause, and a code added to redis/codes.ts and handled nowhere fails to compile.
import { DelayqError } from "../domain/errors";
import type { CodeName } from "../redis/codes";

/** The verbs on a held job, and how their past tense reads in messages. */
export const PAST = {
  finish: "finished",
  touch: "touched",
  release: "released",
  bury: "buried",
} as const;
export type HeldVerb = keyof typeof PAST;
/** The verbs that change a waiting job's due time. */
export type MoveVerb = "reschedule" | "promote";

export type ErrorContext = {
  /** The job's id. */
  id: string;
  /** The job's state as a client sees it, when the script reported it. */
  state?: string;
  /** The verb that was refused, for finish/touch/release/bury, reschedule/promote. */
  verb?: HeldVerb | MoveVerb;
  /** The input field a refusal names (reschedule: delay or runAt). */
  field?: string;
};

/** The error for a script's failure code. Success codes are not errors: asking for one is a bug. */
export function scriptError(code: CodeName, context: ErrorContext): DelayqError {
  const { id, state = "", verb } = context;
  switch (code) {
    case "notFound":
      return notFound(id);
    case "forbidden":
      // A job of a topic outside the caller's scope is answered as missing: a different status
      // would tell a token whether an id exists in a topic it may not see (issue 8.14).
      return notFound(id);
    case "idTaken":
      return new DelayqError(
        "job_exists",
        `Job id ${id} is already used by another topic; ids are unique across topics`,
      );
    case "jobReserved":
      return new DelayqError(
        "job_reserved",
        `Job ${id} is reserved by a consumer; replace works only on jobs not reserved`,
      );
    case "notReserved":
      return new DelayqError(
        "not_reserved",
        `Job ${id} is ${state}, not reserved: only a reserved job can be ${PAST[(verb as HeldVerb | undefined) ?? "finish"]}`,
      );
    case "staleReceipt":
      return new DelayqError("stale_receipt", staleReceipt(id, state));
    case "invalidState":
      return invalidState(id, state, verb === "promote" ? "promote" : "reschedule");
    case "pastDeadline":
      return new DelayqError(
        "invalid_request",
        `${context.field ?? "runAt"}: must not be after job ${id}'s deadline (${isoOf(state)}): a job past its deadline dies instead of running`,
      );
    case "pushTopic":
      return new DelayqError(
        "push_topic",
        `Topic ${id} is a push topic: its jobs are delivered to its webhook, not popped ` +
          '(PUT its config with "push": null to pull it again)',
      );
    case "ok":
    case "replaced":
    case "duplicate":
      throw new Error(`scriptError: "${code}" is a success, not an error`);
    default:
      return unhandled(code);
  }
}

/** A ms time from a script's reply as ISO-8601 (the text itself when it is not a number). */
function isoOf(ms: string): string {
  const n = Number(ms);
  return Number.isFinite(n) && ms !== "" ? new Date(n).toISOString() : ms;
}

/** reschedule or promote of a job in a state they do not change. */
function invalidState(id: string, state: string, verb: MoveVerb): DelayqError {
  const may = verb === "promote" ? "only a delayed job" : "only a delayed or ready job";
  const why =
    state === "reserved"
      ? ": a consumer holds it, or (push topics) it was claimed for delivery at its due time, " +
        "up to 65 s ahead, or published to QStash; delete it and add it anew to change that"
      : state === "ready"
        ? ": it is due already"
        : "";
  return new DelayqError(
    "invalid_state",
    `Job ${id} is ${state}: ${may} can be ${verb === "promote" ? "promoted" : "rescheduled"}${why}`,
  );
}

function unhandled(code: never): never {
  throw new Error(`A script code nobody handles: ${String(code)}`);
}

/** What happened to the reservation a receipt came from, as far as the job's state tells. */
function staleReceipt(id: string, state: string): string {
  const start = `The receipt is not job ${id}'s current one: `;
  switch (state) {
    case "reserved":
      return `${start}another reservation holds the job now (the one the receipt came from ran out of time and the job was popped again), or the receipt belongs to another job`;
    case "ready":
    case "delayed":
      return `${start}no reservation holds the job now (it waits for its next attempt); one the receipt came from ended when the job was released, or when its lease ran out and it was taken back`;
    case "finished":
      return `${start}the job was finished under another reservation`;
    case "dead":
      return `${start}the job is dead (buried, or out of attempts) and holds no reservation`;
    case "deleted":
      return `${start}the job was deleted`;
    default:
      return `${start}the job holds no reservation with it`;
  }
}

export function notFound(id: string): DelayqError {
  return new DelayqError(
    "job_not_found",
    `Job ${id} does not exist (finished and deleted jobs are forgotten after the retention ` +
      "window), or its topic is not one this token may act on",
  );
}
