// The Hono context of the app: the bindings an entry passes, and the variables middleware hands
// to route handlers.
import type { AccountScope } from "../domain/scope";
import type { DelayQueue } from "../queue";
import type { Run } from "../run/run";

export type AppEnv = {
  Bindings: {
    /**
     * The request's run, created by the entry point (functions/worker.ts, functions/node.ts):
     * its clock, subrequest budget and `waitUntil`. When absent (`app.request()` in tests, an
     * embedding app) the app makes one (AppOptions.newRun).
     */
    run?: Run;
  };
  Variables: {
    /** The request's id (http/request-id.ts): in every answer, and in its error's log line. */
    requestId: string;
    /** The request's run (see Bindings.run): its background work is deferred through it. */
    run: Run;
    /** The queue as the caller's token may use it (scoped to its topics). */
    queue: DelayQueue;
    /** The payment accounts the caller's token may watch orders of (undefined: all). */
    accounts: AccountScope;
    /** The caller's token's id (auth.ts: tokenIdOf): watches it starts count under it. */
    tokenId?: string | undefined;
    /** The request's JSON with job bodies kept as sent (http/body.ts: requestJson). */
    rawJson?: unknown;
  };
};
