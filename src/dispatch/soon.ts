// Coalesced runs for work due within seconds: many callers of one invocation asking at once (polls
// ending together, each with its next poll due soon) make one claim instead of one each.
import type { Budget } from "./budget";

/** Starts a run; calls `claimed` once its claim is answered (or failed). */
export type StartRun<R> = (
  topic: string,
  windowMs: number,
  budget: Budget,
  claimed: () => void,
) => Promise<R>;

type State<R> = { claiming?: Promise<void>; next?: Promise<R> };

/**
 * Wraps `start` so that, per budget (one invocation) and topic, at most one run waits to claim: a
 * call made while a claim is being answered joins the run that claims right after it. Whatever a
 * caller wrote before calling is due by then, so that run's claim sees it.
 */
export function coalesced<R>(
  start: StartRun<R>,
): (topic: string, windowMs: number, budget: Budget) => Promise<R> {
  const states = new WeakMap<Budget, Map<string, State<R>>>();
  return (topic, windowMs, budget) => {
    let byKey = states.get(budget);
    if (!byKey) {
      byKey = new Map();
      states.set(budget, byKey);
    }
    const key = `${windowMs}|${topic}`;
    let state = byKey.get(key);
    if (!state) {
      state = {};
      byKey.set(key, state);
    }
    const own = state;
    if (own.next) return own.next;
    const launch = () => {
      let done = () => {};
      own.claiming = new Promise<void>((resolve) => {
        done = resolve;
      });
      const run = start(topic, windowMs, budget, done);
      run.then(done, done);
      return run;
    };
    if (!own.claiming) return launch();
    own.next = own.claiming.then(() => {
      own.next = undefined;
      return launch();
    });
    return own.next;
  };
}
