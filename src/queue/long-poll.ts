// Long-polling pop: waiting until a topic may have a job, cheaply, without a thundering herd, and
// without one request ever resolving another's promise (Workers forbid it, issue 8.1).

import { LISTEN_REFRESH_MS } from "../redis/replies";
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
  /** When a waiter's read last found the counter unchanged (by Date.now()). */
  confirmedAt: number;
  /**
   * Changes with everything that may make a job available here (an offer, a due time, a
   * broadcast, a change of the counter seen): what a pop learned holds only while it stays.
   */
  version: number;
  /** What the last pop learned of an empty ready list (see `Wakeups.learn`). */
  known: Known | undefined;
  /** Until when (by the queue's clock) a pop registered this process's callers as waiting. */
  registeredUntil: number;
};

/** A pop found the ready list empty: when to look again, and the change counter then. */
export type Drained = { nextAt: number | undefined; seq: number };
type Known = Drained & { at: number };

/**
 * The long-polls of one process, by topic. Writers leave tickets in shared state; each waiter
 * checks that state on its own short timer, so a wake-up never crosses requests. Only as many
 * waiters wake as there are jobs to take: a write offers one ticket per job, a due time wakes one
 * waiter (who passes a ticket on when its pop says more may be ready), and one waiter per
 * process polls the topic's change counter for all of them.
 */
export class Wakeups {
  private readonly topics = new Map<string, TopicState>();
  /** Set by `close`: every wait ends at its next step, and none begins. */
  private closed = false;
  /** Versions are unique across states, so a topic's state made anew never matches an old one. */
  private versions = 0;

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
        confirmedAt: 0,
        version: ++this.versions,
        known: undefined,
        registeredUntil: Number.NEGATIVE_INFINITY,
      };
      this.topics.set(topic, state);
    }
    return state;
  }

  /** What a pop learns is current only while nothing has changed: see `learn`. */
  private changed(state: TopicState): void {
    state.version = ++this.versions;
    state.known = undefined;
  }

  /** `count` jobs of the topic became available here: wake as many waiters. */
  offer(topic: string, count = 1): void {
    const state = this.topics.get(topic);
    if (!state) return;
    this.changed(state);
    if (state.waiters > 0) state.tickets = Math.min(state.waiters, state.tickets + count);
  }

  /** A job of the topic was written here, due at `at`: the waiters wake for it (one of them). */
  dueAt(topic: string, at: number): void {
    const state = this.topics.get(topic);
    if (!state) return;
    this.changed(state);
    if (state.waiters > 0) state.hintDue = Math.min(state.hintDue, at);
  }

  /**
   * Ends every wait of this process at its next step (within STEP_MS) and every later one at
   * once: each long-poll answers what it has, nothing. For a graceful shutdown.
   */
  close(): void {
    this.closed = true;
  }

  /** Something about the topic changed for everyone (its config): wake all its waiters. */
  broadcast(topic: string): void {
    const state = this.topics.get(topic);
    if (!state) return;
    this.changed(state);
    state.epoch += 1;
  }

  /** A caller is about to pop for the due time `at`: the other waiters leave it to that pop. */
  private claim(state: TopicState, at: number): void {
    state.claimedDue = Math.max(at, state.claimedDue);
    if (state.hintDue <= state.claimedDue) state.hintDue = Number.POSITIVE_INFINITY;
    state.claimedAt = Date.now();
    state.claimPending = true;
  }

  /** Taken before a pop is sent, and handed to `learn` with what it found. */
  snapshot(topic: string): number | undefined {
    return this.topics.get(topic)?.version;
  }

  /**
   * A pop took jobs and found nothing more ready: something may become available at `nextAt`.
   * One waiter asleep wakes for it, even when every one had given its own due time up to the
   * waiter that took the last job (before, they slept until the counter moved).
   */
  tell(topic: string, nextAt: number | undefined): void {
    const state = this.topics.get(topic);
    if (nextAt !== undefined && state && state.waiters > 0) {
      state.hintDue = Math.min(state.hintDue, nextAt);
    }
  }

  /**
   * A pop that began at `snapshot` found the topic's ready list empty (it reserved nothing, or
   * all there was). Until something changes here, or a poll interval passes without a read of
   * the counter confirming it, a caller of this process that will wait reads the counter
   * instead of sending a pop (`known`, `confirm`). `registeredUntil`: the pop (one that will
   * wait) found callers of the topic registered as waiting until then, by the queue's clock
   * (lib Lua `listen`): adds in other processes bump the counter until then, less the room kept
   * for their clocks.
   */
  learn(
    topic: string,
    snapshot: number | undefined,
    drained: Drained,
    registeredUntil?: number,
  ): void {
    const state = registeredUntil ? this.state(topic) : this.topics.get(topic);
    if (!state) return;
    if (registeredUntil) {
      const until = registeredUntil - LISTEN_REFRESH_MS;
      state.registeredUntil = Math.max(state.registeredUntil, until);
    }
    if (snapshot === undefined || state.version !== snapshot) return;
    state.known = { ...drained, at: Date.now() };
    if (state.seq === undefined) state.seq = drained.seq;
  }

  /**
   * What a pop would find now, or undefined when only a pop can tell. The last pop here found
   * the ready list empty, nothing has changed here since, and the registration covers a wait of
   * `waitMs` from `now` (so that what other processes write moves the counter meanwhile); then:
   * - before its next due time, and less than `pollIntervalMs` after it (or after a read of the
   *   counter that confirmed it), a pop would find nothing if the counter has not moved:
   *   `confirm` must read it (`pending` false);
   * - at or after that due time, when a waiter here has claimed it and its pop is under way,
   *   that pop reads the ready list now and passes a wake-up on if more is ready: the caller
   *   waits for that instead of a pop of its own that would race it (`pending` true); when
   *   none has, the caller claims it for its own pop.
   * A wake-up waiting to be taken is taken by the caller, who pops in place of the waiter.
   */
  known(
    topic: string,
    now: number,
    waitMs: number,
    pollIntervalMs: number,
  ): { drained: Drained; pending: boolean } | undefined {
    const state = this.topics.get(topic);
    if (!state) return undefined;
    // A wake-up is waiting to be taken: this caller pops in place of the waiter it would wake.
    if (state.tickets > 0) {
      state.tickets -= 1;
      return undefined;
    }
    const known = state.known;
    // Any change here since the pop that learned it has forgotten it (`changed`).
    if (!known) return undefined;
    if (now + waitMs > state.registeredUntil) return undefined;
    if (known.nextAt !== undefined && now >= known.nextAt) {
      const claimed =
        state.claimPending &&
        state.claimedDue >= known.nextAt &&
        Date.now() - state.claimedAt <= CLAIM_TIMEOUT_MS;
      if (claimed) return { drained: known, pending: true };
      // This caller pops for the due time that has come: the waiters do not wake for it too.
      this.claim(state, known.nextAt);
      return undefined;
    }
    if (Date.now() - Math.max(known.at, state.confirmedAt) >= pollIntervalMs) return undefined;
    return { drained: known, pending: false };
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
   * Reads the topic's change counter: true when it is where `known` saw it, so that a pop would
   * find nothing. A counter that moved is a change: what this process knew is forgotten.
   */
  async confirm(
    redis: RedisClient,
    topic: string,
    seqKey: string,
    known: Drained,
  ): Promise<boolean> {
    const current = await readSeq(redis, seqKey);
    const state = this.topics.get(topic);
    if (!state) return false;
    state.seqAt = Math.max(state.seqAt, Date.now());
    if (current === known.seq && known === state.known) {
      state.confirmedAt = Date.now();
      return true;
    }
    if (current !== state.seq) {
      state.seq = current;
      this.changed(state);
    }
    return false;
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
        if (this.closed || signal?.aborted || Date.now() >= giveUpAt) return false;
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
            this.claim(state, wakeAt);
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
          const current = await readSeq(options.redis, options.seqKey);
          if (current !== seq) {
            const first = current !== state.seq;
            if (first) this.changed(state);
            state.seq = current;
            seq = current;
            // The first waiter to see a change takes it, and passes a ticket on if there is more.
            if (first) return true;
          } else if (current === state.seq) {
            state.confirmedAt = Date.now();
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
  /** The topic's change counter (keys.ts: seq). */
  seqKey: string;
  /** When something of the topic may become available (unix ms by `clock`); undefined: unknown. */
  nextAt: number | undefined;
  /** The change counter as the pop saw it. */
  seq: number;
  /** When the wait is over, by Date.now(). */
  giveUpAt: number;
  pollIntervalMs: number;
  clock: () => number;
  signal?: Pick<AbortSignal, "aborted">;
};

async function readSeq(redis: RedisClient, key: string): Promise<number> {
  try {
    return Number((await redis.get(key)) ?? 0);
  } catch (error) {
    throw redisError(error);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
