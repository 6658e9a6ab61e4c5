// Building requests: ids for adds (so retries are safe), long-poll waits, path segments.
import { DelayqClientError } from "./errors";

/** The job with an id: its own, or a fresh UUID, so that the add can be retried safely. */
export function withId<T extends { id?: string }>(job: T): T {
  return job.id === undefined ? { ...job, id: crypto.randomUUID() } : job;
}

/** A long-poll's wait in ms, the time a request is held on top of its limit (0: none). */
export function waitMs(wait: number | undefined): number {
  return typeof wait === "number" && Number.isFinite(wait) && wait > 0 ? wait * 1000 : 0;
}

/**
 * A path segment. "." and ".." (valid ids and topic names) are refused here: URL parsing
 * resolves them, even percent-encoded, so they would reach another route (`GET
 * /v1/topics/./jobs` is `GET /v1/topics/jobs`, the stats of topic "jobs"). The command
 * protocol takes such ids in the body.
 */
export function segment(value: string, what: string): string {
  if (typeof value !== "string" || value === "" || value === "." || value === "..") {
    throw new DelayqClientError(
      "invalid_request",
      `The ${what} ${JSON.stringify(value)} cannot be sent in a URL path`,
    );
  }
  return encodeURIComponent(value);
}
