// What every kind of watch offers the service (Payments, Refunds): its poller, a watch read and
// stopped by what it is known by, and the providers' verified notifications, which settle a watch
// through the same transition as a poll. What they lead to is returned as work for the run that
// made it (src/dispatch/loop.ts drains it).
import type { JobHandler } from "../dispatch/dispatcher";
import { DEFAULT_MAX_WATCHES_PER_TOKEN } from "../domain/payments";
import type { Access } from "../domain/scope";
import type { Run } from "../run/run";
import { watchPoller } from "./poller";
import { type Concluded, concludeByNotification } from "./watch-conclude";
import type { KindTypes, WatchKind } from "./watch-kind";
import { getWatch, listWatches, stopWatch } from "./watch-reads";
import { type Started, startWatch } from "./watch-start";
import type { PaymentsOptions } from "./watch-types";

export class Watches<T extends KindTypes> {
  /** The dispatcher's handler of the kind's poll jobs (push url `internal:<its topic>`). */
  readonly poller: JobHandler;

  constructor(
    protected readonly kind: WatchKind<T>,
    protected readonly options: PaymentsOptions,
  ) {
    this.poller = watchPoller(kind, options);
  }

  /** A watch `access` sees, or `<kind>_not_found`. */
  get(key: T["key"], access: Access): Promise<T["view"]> {
    return getWatch(this.kind, this.options, key, access);
  }

  /** Stops a watch `access` sees; it reads `stopped` while it is retained. */
  stop(key: T["key"], access: Access): Promise<void> {
    return stopWatch(this.kind, this.options, key, access);
  }

  /**
   * A provider's verified notification about what a watch watches: settles the watch (one
   * nobody watches is ignored), or tells a late payment (a refund's late success) of an ended
   * one. `applied`: it changed the watch; `how`: "late", or "duplicate" for a `notifyId` the
   * watch took before; `work`: the outcome's pushes.
   */
  async notified(
    run: Run,
    key: T["key"],
    answer: T["answer"],
    notifyId?: string,
  ): Promise<Concluded> {
    const watchId = await this.kind.idOf(key);
    return concludeByNotification(this.kind, this.options, run, watchId, answer, notifyId);
  }

  /**
   * How many watches (payments and refunds together) each token has polling, by token id
   * (http/auth.ts: tokenIdOf), in the order asked; and the most it may (DQ_MAX_WATCHES_PER_TOKEN).
   */
  async tokenWatches(tokenIds: readonly string[]): Promise<{ counts: number[]; max: number }> {
    const counts =
      tokenIds.length === 0
        ? []
        : await this.options.scripts.run("tokenWatchCounts", this.clock(), [...tokenIds]);
    return { counts, max: this.options.maxWatchesPerToken ?? DEFAULT_MAX_WATCHES_PER_TOKEN };
  }

  private clock(): number {
    return (this.options.clock ?? Date.now)();
  }

  /** Starts a watch (see startWatch); `work`: its polls due within seconds. */
  protected startWatch(run: Run, input: unknown, access: Access): Promise<Started<T["view"]>> {
    return startWatch(this.kind, this.options, run, input, access);
  }

  /** Watches newest first, a page at a time, as far as `access` sees them. */
  protected listWatches(page: { cursor?: string; limit: number } & Access) {
    return listWatches(this.kind, this.options, page);
  }
}
