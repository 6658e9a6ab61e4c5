// The rounds of failure notices under way in one process: together they keep at most a cap of
// notice requests open, so that one failureUrl that hangs does not set everyone's pace, while a
// round that waits does not stop the next from going out beside it.

/** Failure notices one round takes at most. */
export const NOTICES_PER_ROUND = 50;
/** Notice requests one process keeps open at once, rounds together. */
const MAX_OPEN_NOTICES = 200;
/**
 * A round older than this is over, whether or not it said so: the longest push timeout is 60 s,
 * and a Worker may cut deferred work off without its `finally` running.
 */
const ROUND_MS = 70_000;

export type NoticeRounds = {
  /** How many notices a round starting `now` may take (0: none now). */
  room(now: number): number;
  /** Counts a round of `most` notices as open from `now`; answers how to close it. */
  open(most: number, now: number): () => void;
};

export function noticeRounds(maxOpen = MAX_OPEN_NOTICES): NoticeRounds {
  const rounds = new Set<{ most: number; at: number }>();
  return {
    room(now) {
      let open = 0;
      for (const round of rounds) {
        if (now - round.at >= ROUND_MS) rounds.delete(round);
        else open += round.most;
      }
      return Math.max(0, Math.min(NOTICES_PER_ROUND, maxOpen - open));
    },
    open(most, now) {
      const round = { most, at: now };
      rounds.add(round);
      return () => rounds.delete(round);
    },
  };
}
