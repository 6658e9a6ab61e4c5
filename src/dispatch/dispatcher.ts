// The push dispatcher: claims due push jobs and delivers them (directly, or by publishing to
// QStash) at their due times, settles each by its receiver's answer, runs the jobs of delayq's own
// push topics through their handlers (payment polls), and tells failureUrls about deaths, all
// within one run's budget (src/dispatch/loop.ts).
import type { DestinationPolicy } from "../domain/destinations";
import { nonPublicUrl, restrictionNote } from "../domain/destinations";
import { CLAIM_AHEAD_MS } from "../domain/push";
import type { Logger } from "../log";
import type { ScriptRunner } from "../redis/runner";
import type { Run } from "../run/run";
import type { Work } from "../run/work";
import { worstJobCost } from "./claims";
import type { Attempt, Post, Route } from "./delivery";
import type { DispatchDeps, DrainReport, JobHandler } from "./deps";
import { type HandOff, qstashHandOff } from "./hand-off";
import { RunLoop } from "./loop";
import { noticeRounds } from "./notice-rounds";
import type { QStash } from "./qstash";
import { settleDeliveries } from "./settle";

export type { ClaimedJob, DrainReport, Handled, JobHandler } from "./deps";

export type DispatcherOptions = {
  /** The service's one script runner. */
  scripts: ScriptRunner;
  log: Logger;
  /** For `via: "qstash"` topics; without it they are delivered directly (and a warning logged). */
  qstash?: QStash;
  /** The service's own public URL, for QStash callbacks and hand-offs. */
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
  /** Counts settled deliveries: `delayq_deliveries_total{topic,outcome}`. */
  count?: (topic: string, outcome: string) => void;
  /** Handlers of delayq's own push topics by kind (push url `internal:<kind>`): payment polls. */
  handlers?: Record<string, JobHandler>;
  /**
   * Subrequests one invocation may make (DQ_SUBREQUESTS): what a run a hand-off asks for can
   * take. Hand-offs need QStash and the public URL. @default no hand-offs
   */
  subrequests?: number;
  /** Most jobs one claim takes. @default 500 */
  batch?: number;
  /**
   * How often the cron ticks, ms (a Worker's `* * * * *`; Node's DQ_TICK_INTERVAL_MS): a job due
   * before the next tick that a run cannot claim itself has a fresh run asked for (hand-offs).
   * @default 60000
   */
  tickIntervalMs?: number;
  /** Notice requests this process keeps open at once, rounds together. @default 200 */
  maxOpenNotices?: number;
};

export type Dispatcher = {
  /**
   * Drains `work` and what it leads to within `run`: claims (as many jobs as the run's budget
   * pays for), deliveries at their due times, handlers, follow-ups, failure notices. Resolves
   * once the run's loop is idle, every claimed job delivered, published or handed to its handler.
   */
  drain(run: Run, work: readonly Work[]): Promise<DrainReport>;
  /**
   * Settles one delivery QStash reported (its callback); `settled` is false when the reservation
   * had ended (ignored). `work`: what follows (a job given back due before the next tick, a death).
   */
  settle(
    run: Run,
    delivery: { id: string; receipt: string; attempt: Attempt; flow?: boolean },
  ): Promise<{ settled: boolean; work: Work[] }>;
  /** Cancels a job's QStash message (a delete does, before it answers). */
  cancel(messageId: string): Promise<void>;
  /** QStash, when topics may push through it (QStash and DQ_PUBLIC_URL are both set). */
  readonly qstash?: QStash;
  /** Hand-offs, when this service can ask QStash for fresh runs. */
  readonly handOff?: HandOff;
};

export function createDispatcher(options: DispatcherOptions): Dispatcher {
  const { scripts, log } = options;
  const handlers = options.handlers ?? {};
  const qstash =
    options.qstash && options.publicUrl !== undefined
      ? { client: options.qstash, publicUrl: options.publicUrl }
      : undefined;
  const deps: DispatchDeps = {
    scripts,
    log,
    qstash,
    route: (topic, url) => routeOf(options, topic, url),
    count: options.count,
    handlers,
    batch: options.batch ?? 500,
    noticeRounds: noticeRounds(options.maxOpenNotices),
    tickIntervalMs: options.tickIntervalMs ?? 60_000,
    handOff:
      qstash && options.subrequests !== undefined
        ? qstashHandOff({
            scripts,
            qstash: qstash.client,
            publicUrl: qstash.publicUrl,
            subrequests: options.subrequests,
            worstJobCost: worstJobCost(handlers),
          })
        : undefined,
    warnNoQStash: once(() =>
      log({
        level: "warn",
        event: "qstash_not_configured",
        message:
          "A topic pushes via QStash, but QSTASH_URL, QSTASH_TOKEN, the signing keys or " +
          "DQ_PUBLIC_URL are not set: delivering directly",
      }),
    ),
  };
  const loops = new WeakMap<Run, RunLoop>();
  const loopOf = (run: Run) => {
    let loop = loops.get(run);
    if (!loop) {
      loop = new RunLoop(run, deps);
      loops.set(run, loop);
    }
    return loop;
  };
  return {
    drain: (run, work) => loopOf(run).drain(work),
    async settle(run, { id, receipt, attempt, flow }) {
      // A QStash answer: the job may be due again before the next tick.
      const [settled] = await settleDeliveries(deps, run, [
        { id, receipt, attempt, windowMs: CLAIM_AHEAD_MS },
      ]);
      const meta = settled?.meta;
      const work = settled?.work ?? [];
      // The topic has `parallelism`: the answer frees a place, its held-back jobs may go now.
      if (meta && flow) {
        work.push({ kind: "claim", topic: meta.topic, horizon: run.clock() + CLAIM_AHEAD_MS });
      }
      return { settled: meta !== undefined, work };
    },
    async cancel(messageId) {
      await options.qstash?.cancel(messageId);
    },
    qstash: qstash?.client,
    handOff: deps.handOff,
  };
}

/**
 * How a topic's delivery or notice to `url` goes out: the fetch to send it with, or why it may
 * not be sent (a topic restricted to public addresses, and a URL that names a private one).
 */
function routeOf(
  options: Pick<DispatcherOptions, "fetch" | "destinations">,
  topic: string,
  url: string,
): Route {
  const { destinations } = options;
  if (!destinations?.policy.restricted(topic)) return { fetch: options.fetch };
  const why = nonPublicUrl(url);
  if (why) return { refused: `${why}; ${restrictionNote(destinations.policy.setting)}` };
  return { fetch: destinations.fetch ?? options.fetch };
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
