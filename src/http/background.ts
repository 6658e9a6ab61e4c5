// Work a request starts and the answer does not wait for (pushes after an add, polls after a
// watch starts, a callback's follow-up).
import type { Context } from "hono";

/**
 * Keeps work going after the response: a Worker's `waitUntil` (the request may not outlive its
 * answer otherwise); on Node the process simply goes on.
 */
export function inBackground(c: Context, work: Promise<unknown>): void {
  try {
    c.executionCtx.waitUntil(work);
  } catch {
    void work; // Node: no ExecutionContext, and none is needed
  }
}
