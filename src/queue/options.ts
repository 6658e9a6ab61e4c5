// DelayQueue's options and their defaults, and the state every scoped view of one queue shares.
import { parseInput } from "../domain/errors";
import { type Backoff, Backoff as BackoffSchema } from "../domain/schemas";
import type { TopicScope } from "../domain/scope";
import {
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_RETENTION_SECONDS,
  DEFAULT_TTR_SECONDS,
} from "../domain/value-schemas";
import { type Keys, keys } from "../redis/keys";
import { createScriptRunner, type RedisClient, type ScriptRunner } from "../redis/runner";
import type { PushedTopic } from "./add-batch";
import { Wakeups } from "./long-poll";

export type DelayQueueOptions = {
  /** An `@upstash/redis` client (`Redis` from "@upstash/redis" or "@upstash/redis/cloudflare"). */
  redis: RedisClient;
  /**
   * The runner of delayq's scripts over `redis`, when the queue shares it with the rest of a
   * service (the dispatcher, payment watches): one runner loads the scripts once for all.
   * It must have the same prefix and retention. @default a runner of the queue's own
   */
  scripts?: ScriptRunner;
  /** Key prefix; every key lives under the Redis Cluster hash tag `{prefix}`. @default "dq" */
  prefix?: string;
  /**
   * How many keyspaces the topics are spread over (docs/cluster.md): 1 keeps every key under
   * `{prefix}`; more spreads the topics over a Redis Cluster's masters. Fixed for a deployment's
   * life. Ignored when `scripts` is given. @default 1
   */
  partitions?: number;
  /**
   * A clock of the caller's, unix ms, for tests: every script then gets `now` from it. Without
   * one, scripts compare and write times on Redis's clock (TIME), the one clock of all callers,
   * so that callers' clocks that disagree cannot hand a job out twice or early, and the queue's
   * own reckoning (long-poll wake-ups, cursor caching) uses Date.now. @default Redis's clock
   */
  clock?: () => number;
  /** How long finished and deleted records are kept, seconds. @default DEFAULT_RETENTION_SECONDS */
  retention?: number;
  /**
   * Defaults for jobs whose topic config does not set them.
   * @default ttr DEFAULT_TTR_SECONDS, maxAttempts DEFAULT_MAX_ATTEMPTS, no backoff
   */
  defaults?: { ttr?: number; maxAttempts?: number; backoff?: Backoff };
  /** Largest job body, in bytes of JSON text. @default DEFAULT_MAX_BODY_BYTES */
  maxBodyBytes?: number;
  /**
   * How often a long-polling pop checks the topic's change counter (one GET) while it waits,
   * ms. It also wakes at the next known due time or lease end, and at once when this process
   * adds to the topic. @default DEFAULT_POLL_INTERVAL_MS (1000)
   */
  pollIntervalMs?: number;
  /**
   * Jobs come back with `body` as a RawJson (the stored JSON text) instead of a parsed value, so
   * that a server can answer them byte for byte (the HTTP app does). @default false
   */
  rawBodies?: boolean;
  /**
   * Called after jobs were written to push topics, with each topic's earliest due job written,
   * so that a server can deliver those due soon without waiting for the next tick.
   */
  onPushed?: (pushed: PushedTopic[]) => void;
  /**
   * Cancels a push job's pending QStash message; `delete` awaits it before it answers, so a
   * deleted job is never delivered after its delete was acknowledged.
   */
  cancelDelivery?: (messageId: string) => Promise<void>;
  /**
   * The topics this queue object may act on, as patterns (`*` is a wildcard); acting on any
   * other topic, or on a job of another topic, fails with `forbidden`, and `topics()` lists only
   * matching ones. Scripts enforce it for jobs addressed by id, in the same request.
   * @default undefined: every topic
   */
  scope?: TopicScope;
};

// The defaults are the API's too (its descriptions state them): defined beside its limits.
export {
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_RETENTION_SECONDS,
  DEFAULT_TTR_SECONDS,
};

/** How often a long-polling pop checks its topic's change counter, ms (DQ_POLL_INTERVAL_MS). */
export const DEFAULT_POLL_INTERVAL_MS = 1000;

/** What every scoped view of one queue shares: the client, the scripts, the long-poll wakeups. */
export type Shared = {
  redis: RedisClient;
  scripts: ScriptRunner;
  keys: Keys;
  /** The caller's clock: the queue's `clock`, else Date.now. */
  clock: () => number;
  /** The `now` scripts get: the queue's `clock`, else undefined (Redis's clock). */
  scriptNow: () => number | undefined;
  maxBodyBytes: number;
  defaults: [ttr: string, maxAttempts: string, backoff: string];
  pollIntervalMs: number;
  wakeups: Wakeups;
  rawBodies: boolean;
  /** The deployment's cursor secret once read (DelayQueue.cursorSecret). */
  cursorSecret?: { secret: Promise<string>; at: number };
};

/** The shared state of a new queue, from its options. */
export function share(options: DelayQueueOptions): Shared {
  const prefix = options.prefix ?? "dq";
  const defaults = options.defaults ?? {};
  const backoff =
    defaults.backoff === undefined ? undefined : parseInput(BackoffSchema, defaults.backoff);
  const retention = options.retention ?? DEFAULT_RETENTION_SECONDS;
  return {
    redis: options.redis,
    scripts:
      options.scripts ??
      createScriptRunner(
        options.redis,
        prefix,
        Math.round(retention * 1000),
        options.partitions ?? 1,
      ),
    keys: keys(prefix),
    clock: options.clock ?? Date.now,
    scriptNow: options.clock ?? (() => undefined),
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    defaults: [
      String((defaults.ttr ?? DEFAULT_TTR_SECONDS) * 1000),
      String(defaults.maxAttempts ?? DEFAULT_MAX_ATTEMPTS),
      backoff === undefined ? "" : JSON.stringify(backoff),
    ],
    pollIntervalMs: options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS,
    wakeups: new Wakeups(),
    rawBodies: options.rawBodies ?? false,
  };
}
