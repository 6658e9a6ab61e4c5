// One invocation's subrequest budget (a Worker's request or cron event, with the work it defers):
// every dispatcher run, poll and notice that invocation starts spends from the same one.

/**
 * Subrequests left to one invocation. Work takes what it may need before it commits to anything
 * (a claim takes only the jobs whose worst cost is taken), and gives back what it did not use, so
 * the invocation as a whole never makes more than `limit` subrequests.
 */
export type Budget = {
  readonly limit: number;
  /** Takes `n` if that many are left (true), else nothing (false). */
  take(n: number): boolean;
  /** Takes as many as are left, up to `n`; answers how many it took. */
  takeUpTo(n: number): number;
  /** Returns taken subrequests that were not made. */
  giveBack(n: number): void;
  /** How many may still be taken. */
  left(): number;
  /** How many are taken (made or about to be). */
  taken(): number;
};

/** A fresh budget of `limit` subrequests (DQ_SUBREQUESTS), one per invocation. */
export function createBudget(limit: number): Budget {
  let taken = 0;
  return {
    limit,
    take(n) {
      if (n < 0 || taken + n > limit) return false;
      taken += n;
      return true;
    },
    takeUpTo(n) {
      const got = Math.max(0, Math.min(n, limit - taken));
      taken += got;
      return got;
    },
    giveBack(n) {
      taken = Math.max(0, taken - Math.max(0, n));
    },
    left: () => limit - taken,
    taken: () => taken,
  };
}
