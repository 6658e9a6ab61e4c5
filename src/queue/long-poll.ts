// Long-polling pop: waiting until a topic may have a job, cheaply, without a thundering herd, and
// without one request ever resolving another's promise (Workers forbid it, issue 8.1).
import type { RedisClient } from "../redis/runner";
import { redisError } from "../redis/runner";

/** How often a waiter looks at its process's shared state, ms (no I/O: a timer and a read). */
const STEP_MS = 20;
/** A due time claimed by a waiter whose pop never completed is up for grabs after this, ms. */
const CLAIM_TIMEOUT_MS = 1000;

/** What one process knows about a topic's waiters. Plain data: no promises, no timers. */
type TopicState = {
  /** Waiters sleeping now. */
  waiters: number;
  /** Wake-ups to hand out, one per job made available in this process (at most `waiters`). */
  tickets: number;
  /** Bumped to wake every waiter (the topic's config changed: it may have resumed). */
  epoch: number;
  /** The earliest due time written in this process since the waiters began (a job added). */
  hintDue: number;
  /** The latest due time a waiter took on (the others do not wake for it). */
  claimedDue: number;
  /** When that claim was made, and whether its pop is still to come. */
  claimedAt: number;
  claimPending: boolean;
  /** The topic's change counter as last read by a waiter of this process, and when. */
  seq: number | undefined;
  seqAt: number;
};

/**
 * The long-polls of one process, by topic. Writers leave tickets in shared state; each waiter
 * checks that state on its own short timer, so a wake-up never crosses requests. Only as many
 * waiters wake as there are jobs to take: a write offers one ticket per job, a due time wakes one
 * waiter (who passes a ticket on when its pop says more may be ready), and one waiter per
 * process polls the topic's change counter for all of them.
 */
export class Wakeups {
  private readonly topics = new Map<string, TopicState>();

  private state(topic: string): TopicState {
    let state = this.topics.get(topic);
    if (!state) {
      state = {
        waiters: 0,
        tickets: 0,
        epoch: 0,
        hintDue: Number.POSITIVE_INFINITY,
        claimedDue: Number.NEGATIVE_INFINITY,
        claimedAt: 0,
        claimPending: false,
        seq: undefined,
        seqAt: 0,
      };
      this.topics.set(topic, state);
    }
    return state;
  }

  /** `count` jobs of the topic became available here: wake as many waiters. */
  offer(topic: string, count = 1): void {
    const state = this.topics.get(topic);
    if (state && state.waiters > 0) state.tickets = Math.min(state.waiters, state.tickets + count);
  }

  /** A job of the topic was written here, due at `at`: the waiters wake for it (one of them). */
  dueAt(topic: string, at: number): void {
    const state = this.topics.get(topic);
    if (state && state.waiters > 0) state.hintDue = Math.min(state.hintDue, at);
  }

  /** Something about the topic changed for everyone (its config): wake all its waiters. */
  broadcast(topic: string): void {
    const state = this.topics.get(topic);
    if (state) state.epoch += 1;
  }

  /** How many callers wait for the topic in this process now. */
  waiting(topic: string): number {
    return this.topics.get(topic)?.waiters ?? 0;
  }

  /** A caller has popped: when more jobs may be ready (its pop was full), one waiter wakes. */
  popped(topic: string, more: boolean): void {
    const state = this.topics.get(topic);
    if (!state) return;
    state.claimPending = false;
    if (more) this.offer(topic, 1);
  }

  /** Forgets topics nobody waits on, so the map does not grow with every topic ever polled. */
  private release(topic: string, state: TopicState): void {
    if (state.waiters > 0) return;
    if (state.tickets === 0) this.topics.delete(topic);
    else state.hintDue = Number.POSITIVE_INFINITY;
  }

  /**
   * Sleeps until something may be ready in the topic: a ticket, the topic's next due time (if
   * no other waiter took it), a change of its counter in Redis (read at most once per poll
   * interval by one waiter of this process), or a broadcast. False when the wait is over first.
   */
  async wait(options: WaitOptions): Promise<boolean> {
    const { topic, giveUpAt, pollIntervalMs, clock, signal } = options;
    const state = this.state(topic);
    const epoch = state.epoch;
    let seq = options.seq;
    let wakeAt = options.nextAt ?? Number.POSITIVE_INFINITY;
    // The pop that led here read the counter just now: the next look is due an interval later.
    state.seqAt = Math.max(state.seqAt, Date.now());
    state.waiters += 1;
    try {
      for (;;) {
        if (signal?.aborted || Date.now() >= giveUpAt) return false;
        if (state.epoch !== epoch) return true;
        if (state.tickets > 0) {
          state.tickets -= 1;
          return true;
        }
        // A hint no later than a due time already taken was seen by that waiter's pop (the add
        // had finished before the claim): it is spent, and must not replace this waiter's own.
        if (state.hintDue < wakeAt && state.hintDue > state.claimedDue) wakeAt = state.hintDue;
        if (clock() >= wakeAt) {
          const stale = state.claimPending && Date.now() - state.claimedAt > CLAIM_TIMEOUT_MS;
          if (wakeAt > state.claimedDue || stale) {
            state.claimedDue = Math.max(wakeAt, state.claimedDue);
            if (state.hintDue <= state.claimedDue) state.hintDue = Number.POSITIVE_INFINITY;
            state.claimedAt = Date.now();
            state.claimPending = true;
            return true;
          }
          // Another waiter took this due time; it passes a ticket on if there is more.
          wakeAt = Number.POSITIVE_INFINITY;
        }
        // No poll in the wait's last interval: the caller's next pop (which follows at once)
        // sees any change as soon, for a command less.
        const last = giveUpAt - Date.now() <= pollIntervalMs;
        if (!last && Date.now() - state.seqAt >= pollIntervalMs) {
          state.seqAt = Date.now();
          const current = await readSeq(options.redis, options.metaKey);
          if (current !== seq) {
            const first = current !== state.seq;
            state.seq = current;
            seq = current;
            // The first waiter to see a change takes it, and passes a ticket on if there is more.
            if (first) return true;
          }
          continue;
        }
        const untilDue = wakeAt - clock();
        await sleep(Math.max(1, Math.min(STEP_MS, giveUpAt - Date.now(), untilDue)));
      }
    } finally {
      state.waiters -= 1;
      state.tickets = Math.min(state.tickets, state.waiters);
      this.release(topic, state);
    }
  }
}

export type WaitOptions = {
  redis: RedisClient;
  topic: string;
  /** The topic's hash, whose `seq` field is its change counter. */
  metaKey: string;
  /** When something of the topic may become available (unix ms by `clock`); undefined: unknown. */
  nextAt: number | undefined;
  /** The change counter as the pop saw it. */
  seq: number;
  /** When the wait is over, by Date.now(). */
  giveUpAt: number;
  pollIntervalMs: number;
  clock: () => number;
  signal?: AbortSignal;
};

async function readSeq(redis: RedisClient, key: string): Promise<number> {
  try {
    return Number((await redis.hget(key, "seq")) ?? 0);
  } catch (error) {
    throw redisError(error);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
