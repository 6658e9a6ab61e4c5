// The Hono context of the app: the variables middleware hands to route handlers.
import type { AccountScope } from "../domain/scope";
import type { DelayQueue } from "../queue";

export type AppEnv = {
  Variables: {
    /** The queue as the caller's token may use it (scoped to its topics). */
    queue: DelayQueue;
    /** The payment accounts the caller's token may watch orders of (undefined: all). */
    accounts: AccountScope;
    /** The request's JSON with job bodies kept as sent (http/body.ts: requestJson). */
    rawJson?: unknown;
  };
};
