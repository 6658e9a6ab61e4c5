// Work that follows from work: what a delivery, a poll, a notification or a request leads to,
// returned to the run's loop (src/dispatch/loop.ts) instead of being called from where it arose.
import { CLAIM_AHEAD_MS, DIRECT_WINDOW_MS } from "../domain/push";

export type Work =
  /**
   * Claim the push jobs due by `horizon` (of `topic`, or of every push topic) and deliver each
   * at its due time: a job given back due soon, an outcome added to a notify topic, the polls of
   * a watch due within seconds.
   */
  | {
      kind: "claim";
      topic?: string;
      horizon: number;
      /** A run a hand-off asked for: the jobs it takes off the hand-offs' promise. */
      consume?: number;
      /** ... and the wave it was asked for (src/dispatch/hand-off.ts). */
      wave?: number;
      /**
       * A follow-up for a job due then (a watch's next poll, a job added due soon): the run
       * claims it if its window reaches that far, else asks for a run that will (when the next
       * tick may come too late for it).
       */
      due?: number;
    }
  /** Send the failure notices waiting (a push job died), up to `most` of them. */
  | { kind: "notices"; most?: number };

/**
 * Claim `topic`'s jobs due within the window a run that is not a tick delivers itself; with
 * `due`, also the job due then (see Work's `due`).
 */
export function soon(topic: string, now: number, due?: number): Work {
  const work: Work = { kind: "claim", topic, horizon: now + DIRECT_WINDOW_MS };
  return due === undefined ? work : { ...work, due };
}

/** Claim every push job due before the next tick (what a tick does). */
export function beforeNextTick(now: number): Work {
  return { kind: "claim", horizon: now + CLAIM_AHEAD_MS };
}

/** Send the failure notices waiting. */
export function notices(most?: number): Work {
  return most === undefined ? { kind: "notices" } : { kind: "notices", most };
}
