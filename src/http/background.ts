// Work a request starts and the answer does not wait for (pushes after an add, polls after a
// watch starts, a callback's follow-up).
import type { Context } from "hono";
import { type Logger, messageOf } from "../log";

/**
 * Keeps work going after the response: a Worker's `waitUntil` (the request may not outlive its
 * answer otherwise); on Node the process simply goes on. Work that fails is logged
 * (`background_failed`, with the request's path), never left as a rejection nobody handles: on
 * Node one ends the process, so a Redis timeout in a watch's first polls after its start would
 * take the whole service down.
 */
export function inBackground(log: Logger) {
  return (c: Context, work: Promise<unknown>): void => {
    const guarded = work.then(undefined, (error: unknown) => {
      log({
        level: "error",
        event: "background_failed",
        path: c.req.path,
        message: messageOf(error),
      });
    });
    try {
      c.executionCtx.waitUntil(guarded);
    } catch {
      // Node: no ExecutionContext, and none is needed
    }
  };
}
