// Cron expressions and time zones, read by croner (no dependencies, Intl for time zones: it runs
// in workerd as on Node). Only here does delayq compute fire times; the scripts take them.
import { Cron } from "croner";
import { DelayqError } from "../domain/errors";

/** A schedule's cron in its time zone, checked. */
export type CronTimes = {
  /** The fires after `after` (exclusive) up to `until` (inclusive), at most `most`, ascending. */
  between(after: number, until: number, most: number): number[];
  /** The first fire after `after` (exclusive), or undefined when the cron has none left. */
  next(after: number): number | undefined;
  /** The last fire at or before `at`, or undefined. */
  latest(at: number): number | undefined;
};

/** Whether `name` is a time zone this runtime knows (an IANA name, or UTC). */
export function knownTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/**
 * Reads `cron` (5 fields, or 6 with seconds first) in `timezone`, or throws 400 invalid_request
 * naming the field at fault: `timezone` for a zone Intl does not know, `cron` for an expression
 * croner refuses (its reason quoted).
 */
export function cronTimes(cron: string, timezone: string): CronTimes {
  if (!knownTimeZone(timezone)) {
    throw new DelayqError(
      "invalid_request",
      `Invalid request: timezone: "${timezone.slice(0, 64)}" is not an IANA time zone ` +
        '(e.g. "UTC", "Asia/Shanghai", "America/New_York")',
    );
  }
  const fields = cron.trim().split(/\s+/).length;
  let job: Cron;
  try {
    if (!cron.trim().startsWith("@") && fields !== 5 && fields !== 6) {
      throw new Error(`it has ${fields} fields`);
    }
    job = new Cron(cron, {
      timezone,
      mode: "5-or-6-parts",
      // Vixie cron's rule for daylight-saving changes: a job with no wildcard or step in its
      // seconds, minutes and hours is a fixed-time job (fires after a skipped hour, once in a
      // repeated one); the others run in real time.
      fixedTimeRule: "no-wildcard",
      paused: true,
    });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new DelayqError(
      "invalid_request",
      `Invalid request: cron: "${cron.slice(0, 64)}" is not a cron expression of 5 fields ` +
        `(minute hour day month weekday) or 6 with seconds first: ${reason}`,
    );
  }
  const next = (after: number): number | undefined => job.nextRun(new Date(after))?.getTime();
  return {
    next,
    between(after, until, most) {
      const out: number[] = [];
      let at = after;
      while (out.length < most) {
        const fire = next(at);
        if (fire === undefined || fire > until) break;
        out.push(fire);
        at = fire;
      }
      return out;
    },
    latest(at) {
      // previousRuns looks before its reference: a fire exactly at `at` counts.
      const [fire] = job.previousRuns(1, new Date(at + 1));
      return fire?.getTime();
    },
  };
}
