// Test helpers: assertions on a call that must fail, by error class and (for the engine) code.
import { expect } from "vitest";
import { DelayqError, type ErrorCode } from "../../src/index";

/** The rejection of a call, which must be an instance of `type`; a resolved call fails. */
export async function expectRejection<E>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => E,
): Promise<E> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(type);
  return error as E;
}

/**
 * The rejection of an engine call: a DelayqError with this code and a message matching, and its
 * `detail` (what only the log is told) matching `detail`.
 */
export async function expectError(
  promise: Promise<unknown>,
  code: ErrorCode,
  message?: RegExp,
  detail?: RegExp,
): Promise<DelayqError> {
  const error = await expectRejection(promise, DelayqError);
  expect(error.code).toBe(code);
  if (message) expect(error.message).toMatch(message);
  if (detail) expect(error.detail).toMatch(detail);
  return error;
}
