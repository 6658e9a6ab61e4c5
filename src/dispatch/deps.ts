// What the dispatcher's parts share: the script runner, how a URL is reached, the handlers of
// delayq's own push topics by kind, and the run's report. Built once by createDispatcher.
import type { Logger } from "../log";
import type { RecordMeta } from "../redis/record";
import type { ScriptRunner } from "../redis/runner";
import type { Run } from "../run/run";
import type { Work } from "../run/work";
import type { Route } from "./delivery";
import type { HandOff } from "./hand-off";
import type { NoticeRounds } from "./notice-rounds";
import type { QStash } from "./qstash";

/** A claimed job of one of delayq's own push topics, for its handler. */
export type ClaimedJob = { meta: RecordMeta; body: string };

/** What a handler did with one job: the subrequests it made, and the work that follows. */
export type Handled = { used: number; work: Work[] };

/**
 * The handler of one of delayq's own push topics (its push url is `internal:<kind>`), e.g. the
 * payment poller for `internal:payments`. It settles each job itself.
 */
export type JobHandler = {
  /** The most subrequests one job costs (taken from the run's budget when it is claimed). */
  subrequests: number;
  run(job: ClaimedJob, run: Run): Promise<Handled>;
};

/** What one drain of a run did. */
export type DrainReport = {
  claimed: number;
  delivered: number;
  failed: number;
  published: number;
  /** Failure notices sent. */
  notices: number;
  /** Fresh invocations asked for (through QStash) to take what this one's budget could not. */
  handedOff: number;
  /**
   * Fresh invocations asked for (through QStash) for jobs due before the next tick that this one
   * could not wait for (one per topic and 20 s wave; QStash drops repeats).
   */
  covered: number;
  /** Whether push work was possibly left when the budget or the run's time stopped it. */
  more: boolean;
};

export type DispatchDeps = {
  scripts: ScriptRunner;
  log: Logger;
  /** QStash, with the public URL its callbacks reach us at; only when both are configured. */
  qstash?: { client: QStash; publicUrl: string };
  /** How a topic's delivery or notice to `url` goes out, or why it may not. */
  route(topic: string, url: string): Route;
  /** Counts a settled delivery (`delayq_deliveries_total{topic,outcome}`). */
  count?(topic: string, outcome: string): void;
  /** delayq's own push topics' handlers, by kind. */
  handlers: Readonly<Record<string, JobHandler>>;
  /** Most jobs one claim takes. */
  batch: number;
  /** This process's notice rounds under way (they share a cap of open requests). */
  noticeRounds: NoticeRounds;
  /** Asks fresh invocations to take the work a run's budget cannot (QStash); none: next tick. */
  handOff?: HandOff;
  /** How often the cron ticks, ms: each tick claims what falls due before the next one. */
  tickIntervalMs: number;
  /** Says once per process that a topic wants QStash and it is not configured. */
  warnNoQStash(): void;
};

export function emptyReport(): DrainReport {
  return {
    claimed: 0,
    delivered: 0,
    failed: 0,
    published: 0,
    notices: 0,
    handedOff: 0,
    covered: 0,
    more: false,
  };
}
