// Checking delayq's answers: the field a method returns is there and of its kind, or
// invalid_response.

import { DelayqClientError } from "./errors";
import type { Answer } from "./transport";
import type { AddResult, WatchRefundResult, WatchResult } from "./types";

/** The answer's field `key`, checked to be of its kind; else invalid_response. */
export function expectField(
  answer: Answer,
  key: string,
  kind: "object" | "array" | "number" | "boolean" | "string",
): unknown {
  const data = answer.data;
  const value =
    typeof data === "object" && data !== null ? (data as Record<string, unknown>)[key] : undefined;
  const ok =
    kind === "array"
      ? Array.isArray(value)
      : kind === "object"
        ? typeof value === "object" && value !== null
        : typeof value === kind;
  if (!ok) throw invalidResponse(answer, `${kind === "array" ? "an" : "a"} ${kind} "${key}"`);
  return value;
}

/** An add's answer, checked to hold `created` and `job`. */
export function expectAddResult(answer: Answer, data: unknown): AddResult {
  expectField(answer, "created", "boolean");
  expectField(answer, "job", "object");
  return data as AddResult;
}

/** A watch's start, checked to hold `created` and `payment`. */
export function expectWatchResult(answer: Answer): WatchResult {
  expectField(answer, "created", "boolean");
  expectField(answer, "payment", "object");
  return answer.data as WatchResult;
}

/** A refund watch's start: `created` and the watch. */
export function expectRefundResult(answer: Answer): WatchRefundResult {
  expectField(answer, "created", "boolean");
  expectField(answer, "refund", "object");
  return answer.data as WatchRefundResult;
}

/** The error for an answer that lacks what the method returns. */
export function invalidResponse(answer: Answer, wanted: string): DelayqClientError {
  return new DelayqClientError(
    "invalid_response",
    `delayq's answer (HTTP ${answer.status}) lacks ${wanted}: ${JSON.stringify(answer.data).slice(0, 200)}`,
    { status: answer.status },
  );
}
