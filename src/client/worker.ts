// A consumer loop over the client, as BullMQ's Worker: pop, run the handler, finish in the next
// pop (finishAndPop), give a job back when its handler throws, keep its lease while it runs.
import { DelayqClientError } from "./errors";
import type { FinishItemResult, Job, PopOptions } from "./types";

/** What the worker needs of the client (DelayqClient has it). */
export type WorkerCalls = {
  finishAndPop(
    topic: string,
    jobs: readonly { id: string; receipt?: string }[],
    options: PopOptions,
  ): Promise<{ jobs: Job[]; finished: FinishItemResult[] }>;
  finishMany(jobs: readonly { id: string; receipt?: string }[]): Promise<FinishItemResult[]>;
  touch(id: string, options: { receipt?: string }): Promise<Job>;
  release(id: string, options: { receipt?: string; error?: string }): Promise<Job>;
};

/**
 * A job's handler. `signal` aborts when the job's lease is lost (a touch was refused): another
 * consumer may be running it, and what this one finishes will be refused.
 */
export type JobHandler = (job: Job, signal: AbortSignal) => unknown;

export type WorkOptions = {
  /** Loops popping and running jobs side by side. @default 1 */
  concurrency?: number;
  /** Jobs each loop reserves at a time, run one after the other, 1 to 100. @default 1 */
  count?: number;
  /** Seconds a loop holding no job long-polls for one, up to 20. @default 20 */
  wait?: number;
  /** Stops the worker, as `stop()` does. */
  signal?: AbortSignal;
  /**
   * Told of what the worker does not throw: a handler's error (the job was given back for its
   * next attempt), a finish the server refused (the lease had ended: another consumer may run
   * the job again), a lost lease, a failed call (retried after `retryDelayMs`). Default: none.
   */
  onError?: (error: unknown, job?: Job) => void;
  /** The pause after a call failed, before the loop tries again. @default 1000 */
  retryDelayMs?: number;
};

/** A running worker. */
export type Worker = {
  /**
   * Stops popping, lets the running handlers end (and the jobs their loops had reserved run),
   * finishes what they finished, and settles as `done` does. A long-poll in flight is cut short.
   */
  stop(): Promise<void>;
  /**
   * Resolves when every loop has ended (after `stop()` or the `signal`); rejects with the
   * server's refusal of a pop (a 4xx: a token without this topic, a push topic), which ends the
   * worker, since asking again would not help. Failures without an answer (network, 503) are
   * retried instead.
   */
  readonly done: Promise<void>;
};

/**
 * Runs `handler` for each job of `topic`. Each loop finishes the jobs its handler ran in the pop
 * that takes its next ones (one request a job, not two), popping without a wait while it holds
 * some so that their finish is not held up; a loop holding none long-polls. A handler that
 * throws (or rejects) has its job released with its message as the `error` (the job's lastError),
 * to run again after the topic's backoff step (or to die, out of attempts). While a handler runs, the job's lease is extended (touch) every half of
 * its TTR; if the server refuses, the lease is lost and the handler's signal aborts.
 */
export function work(
  calls: WorkerCalls,
  topic: string,
  handler: JobHandler,
  options: WorkOptions = {},
): Worker {
  const {
    concurrency = 1,
    count = 1,
    wait = 20,
    onError = () => {},
    retryDelayMs = 1000,
  } = options;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new RangeError(`concurrency: give a whole number of loops ≥ 1, not ${concurrency}`);
  }
  if (!Number.isInteger(count) || count < 1 || count > 100) {
    throw new RangeError(`count: give a whole number of jobs from 1 to 100, not ${count}`);
  }
  if (!(wait >= 0 && wait <= 20)) throw new RangeError(`wait: give 0 to 20 seconds, not ${wait}`);
  let refused: unknown;
  const stopping = new AbortController();
  const stopOn = options.signal;
  const onStop = () => stopping.abort(stopOn?.reason);
  if (stopOn?.aborted) onStop();
  else stopOn?.addEventListener("abort", onStop, { once: true });
  const report = (error: unknown, job?: Job) => {
    try {
      onError(error, job);
    } catch {
      // The caller's reporter must not end the loop.
    }
  };

  /** Runs one job with its lease kept; true when its handler ended without an error. */
  const run = async (job: Job): Promise<boolean> => {
    const lease = new AbortController();
    const every = Math.max(500, (job.ttr * 1000) / 2);
    const timer = setInterval(() => {
      calls.touch(job.id, { receipt: job.receipt }).catch((error: unknown) => {
        // A refusal (4xx) means the lease is gone; a failed call is tried again next time.
        if (isRefusal(error)) {
          clearInterval(timer);
          lease.abort(error);
        }
        report(error, job);
      });
    }, every);
    try {
      await handler(job, lease.signal);
      return true;
    } catch (error) {
      report(error, job);
      await calls
        .release(job.id, { receipt: job.receipt, error: failureText(error) })
        .catch((e: unknown) => report(e, job));
      return false;
    } finally {
      clearInterval(timer);
    }
  };

  const loop = async () => {
    let held: Job[] = [];
    while (!stopping.signal.aborted) {
      let jobs: Job[];
      try {
        const answer = await calls.finishAndPop(topic, held, {
          count,
          wait: held.length > 0 ? 0 : wait,
          signal: stopping.signal,
        });
        reportRefused(answer.finished, held, report);
        held = [];
        jobs = answer.jobs;
      } catch (error) {
        if (stopping.signal.aborted) break;
        if (isRefusal(error)) {
          // The pop itself was refused (a token without this topic, a push topic): asking again
          // will not help. The worker ends, and `done` rejects with the refusal.
          refused ??= error;
          stopping.abort(error);
          break;
        }
        // The finishes are tried again with the next pop: finishing twice answers the same.
        report(error);
        await sleep(retryDelayMs, stopping.signal);
        continue;
      }
      for (const job of jobs) {
        // Jobs reserved before a stop are still run: they are leased to this worker.
        if (await run(job)) held.push(job);
      }
    }
    if (held.length > 0) {
      try {
        reportRefused(await calls.finishMany(held), held, report);
      } catch (error) {
        report(error);
      }
    }
  };

  const done = Promise.all(Array.from({ length: concurrency }, loop)).then(() => {
    stopOn?.removeEventListener("abort", onStop);
    if (refused !== undefined) throw refused;
  });
  return {
    done,
    stop() {
      stopping.abort(new Error("The worker was stopped"));
      return done;
    },
  };
}

/** Reports each finish the server refused, with its job. */
function reportRefused(
  results: readonly FinishItemResult[],
  jobs: readonly Job[],
  report: (error: unknown, job?: Job) => void,
) {
  results.forEach((result, i) => {
    // An item's refusal has a code and a message, no status of its own (the answer was a 200).
    if ("error" in result)
      report(new DelayqClientError(result.error.code, result.error.message), jobs[i]);
  });
}

/** Whether the server refused the call (a 4xx), rather than failing to answer it. */
/** The most bytes (UTF-8) of a release's `error`. */
const MAX_ERROR_BYTES = 1024;
const utf8 = new TextEncoder();

/**
 * What a handler threw, as a release's `error` (the job's lastError): its message (its text when
 * it threw no Error), cut to 1 KiB with "…" at the cut.
 */
export function failureText(error: unknown): string {
  const text = (error instanceof Error ? error.message || error.name : String(error)) || "failed";
  if (utf8.encode(text).length <= MAX_ERROR_BYTES) return text;
  let cut = text.slice(0, MAX_ERROR_BYTES - 3);
  while (utf8.encode(`${cut}…`).length > MAX_ERROR_BYTES) cut = cut.slice(0, -1);
  return `${cut}…`;
}

function isRefusal(error: unknown): boolean {
  return error instanceof DelayqClientError && error.status >= 400 && error.status < 500;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
