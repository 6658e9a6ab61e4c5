// Counts the fetches delayq makes (a Worker's subrequests), by destination and by invocation: a
// wrapper around the global fetch reads an AsyncLocalStorage tally, so work deferred by a tick or a
// request (waitUntil on Workers) is counted with the invocation that started it.
import { AsyncLocalStorage } from "node:async_hooks";

/** One invocation's fetches by destination ("redis", "qstash", "delivery", "provider", ...). */
export type Tally = {
  /** What started it: "tick 3", "request", "callback". */
  label: string;
  counts: Record<string, number>;
  /** When the invocation started and when its last fetch was made (performance.now()). */
  startedAt: number;
  lastFetchAt: number;
};

export type Classify = (url: URL) => string | undefined;

export type FetchCounter = {
  /** Runs `work` as one invocation; its fetches (and those of work it defers) go to `tally`. */
  run<T>(tally: Tally, work: () => T): T;
  tally(label: string): Tally;
  /** The invocation the caller runs in, if any. */
  current(): Tally | undefined;
  /** Fetches made outside any invocation, by destination. */
  outside: Record<string, number>;
  /** Puts the global fetch back. */
  uninstall(): void;
};

/** Sum of a tally's counts, or of the named destinations only. */
export function tallyTotal(tally: Tally, only?: readonly string[]): number {
  let total = 0;
  for (const [name, n] of Object.entries(tally.counts)) {
    if (!only || only.includes(name)) total += n;
  }
  return total;
}

/**
 * Replaces the global fetch with a counting one. `classify` names a URL's destination; a URL it
 * answers undefined for (the harness's own control calls) is not counted. `onFetch` sees every
 * counted fetch (e.g. to time a provider query).
 */
export function installFetchCounter(
  classify: Classify,
  onFetch?: (destination: string, url: URL) => void,
): FetchCounter {
  const original = globalThis.fetch;
  const storage = new AsyncLocalStorage<Tally>();
  const outside: Record<string, number> = {};
  const counted: typeof fetch = (input, init) => {
    const url = new URL(
      typeof input === "string" ? input : input instanceof URL ? input.href : input.url,
    );
    const destination = classify(url);
    if (destination !== undefined) {
      const tally = storage.getStore();
      const counts = tally ? tally.counts : outside;
      counts[destination] = (counts[destination] ?? 0) + 1;
      if (tally) tally.lastFetchAt = performance.now();
      onFetch?.(destination, url);
    }
    return original(input, init);
  };
  globalThis.fetch = counted;
  return {
    run: (tally, work) => storage.run(tally, work),
    current: () => storage.getStore(),
    tally: (label) => ({
      label,
      counts: {},
      startedAt: performance.now(),
      lastFetchAt: performance.now(),
    }),
    outside,
    uninstall() {
      if (globalThis.fetch === counted) globalThis.fetch = original;
    },
  };
}
