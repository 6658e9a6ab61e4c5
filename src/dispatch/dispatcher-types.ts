// The dispatcher's shapes: its options, what a run is given and reports, and its methods.
import type { DestinationPolicy } from "../domain/destinations";
import type { Logger } from "../log";
import type { RedisClient } from "../redis/runner";
import type { Budget } from "./budget";
import type { InternalHandler } from "./claims";
import type { Attempt, Post } from "./delivery";
import type { QStash } from "./qstash";

export type DispatcherOptions = {
  redis: RedisClient;
  prefix: string;
  retentionMs: number;
  clock?: () => number;
  /** For `via: "qstash"` topics; without it they are delivered directly (and a warning logged). */
  qstash?: QStash;
  /** The service's own public URL, for QStash callbacks. */
  publicUrl?: string;
  /** The fetch deliveries and notices go out with. @default the global fetch */
  fetch?: Post;
  /**
   * Which topics deliver to public addresses only (DQ_PRIVATE_PUSH), and the fetch that connects
   * to public addresses only for them (Node: publicFetch). Without that fetch only the URL as
   * written is checked: the Worker has none, Cloudflare's network reaching no private one.
   * @default none restricted
   */
  destinations?: { policy: DestinationPolicy; fetch?: Post };
  log: Logger;
  /** Counts deliveries: `delayq_deliveries_total{topic,outcome}`. */
  count?: (name: string, labels: Record<string, string>, n?: number) => void;
  /**
   * Subrequests one invocation may make (Workers: 50 on the free plan, 10,000 on paid ones):
   * the limit of the budget a run makes for itself when it is given none. @default 1000
   */
  subrequests?: number;
  /** Most jobs one claim takes. @default 500 */
  batch?: number;
  /**
   * Handlers of delayq's own push topics, by their push url (`internal:<name>`): payment polls.
   * A handler settles its job itself.
   */
  internal?: Record<string, InternalHandler>;
};

export type DispatchReport = {
  claimed: number;
  delivered: number;
  failed: number;
  published: number;
  /** Whether the budget stopped the run with push work possibly left. */
  more: boolean;
};

export type RunOptions = {
  now: number;
  horizon?: number;
  topic?: string;
  /**
   * The invocation's budget, shared with every run this one starts (follow-ups, internal jobs'
   * own runs). @default a fresh one of `subrequests`
   */
  budget?: Budget;
  /** Called once the run has claimed (or failed to): what it claimed has its budget taken. */
  onClaimed?: () => void;
};

export type Dispatcher = {
  /**
   * Claims push jobs due by `horizon` (of every push topic, or of `topic`) and delivers them at
   * their due times, as many as the budget pays for. Resolves once every claimed job is
   * delivered or published.
   */
  run(options: RunOptions): Promise<DispatchReport>;
  /**
   * Runs `topic`'s jobs due within `windowMs`, from `budget`; calls made while such a run has not
   * claimed yet join it (many polls ending at once make one claim, not one each).
   */
  soon(topic: string, windowMs: number, budget?: Budget): Promise<DispatchReport>;
  /**
   * Settles one delivery by its answer; false when the reservation had ended (ignored). A job
   * given back due before the next tick is claimed again at once, its run handed to `defer`
   * (a request's waitUntil; awaited without one).
   */
  settle(
    id: string,
    receipt: string,
    attempt: Attempt,
    defer?: (work: Promise<unknown>) => void,
    budget?: Budget,
  ): Promise<boolean>;
  /** Sends queued failure notices (as many as the budget pays for); answers how many went out. */
  sendNotices(limit?: number, budget?: Budget): Promise<number>;
  /** Cancels a job's QStash message (a delete does, before it answers). */
  cancel(messageId: string): Promise<void>;
  /** A fresh budget of `subrequests`, for one invocation. */
  budget(): Budget;
  qstash?: QStash;
};
