// DelayQueue: the library's public API. Each operation is one Lua script, so one REST request.
import type { z } from "zod";
import { DelayqError, parseInput } from "../domain/errors";
import type {
  AddResult,
  BatchItemResult,
  FinishItemResult,
  JobPage,
  TickSlice,
  TopicPage,
} from "../domain/results";
import {
  type AddJobInput,
  BuryInput,
  Job,
  JobId,
  KickInput,
  type ListableState,
  MAX_BATCH,
  PopInput,
  ReceiptInput,
  ReleaseInput,
  RescheduleInput,
  type TopicConfig,
  type TopicConfigPatch,
  TopicName,
  type TopicStats,
} from "../domain/schemas";
import { scopeAllows, scopeToLua, type TopicScope } from "../domain/scope";
import { messageOf } from "../log";
import { errorField } from "../redis/record";
import { redisError } from "../redis/runner";
import { prepareAdd, prepareBatch, runAdds } from "./add-batch";
import { type HeldVerb, scriptError } from "./errors";
import { finishList, finishMany, finishOne, runHeld } from "./held-jobs";
import { readJob, readJobPage } from "./job-reads";
import { moveJob } from "./move-jobs";
import { type DelayQueueOptions, type Shared, share } from "./options";
import { popJobs } from "./pop-jobs";
import { readCursorSecret, readTopicPage, readTopicStats, setTopicConfig } from "./topics";

/**
 * Jobs and topics one tick script call may handle. 500 jobs keep a slice under ~7 ms of Redis
 * time while a 1M-job backlog drains (1000 took up to 12 ms: bench/scale.ts).
 */
export const TICK_SLICE = { jobs: 500, topics: 100 } as const;

/** What a view of a queue sets for itself; the rest of its options are its queue's. */
type ViewOptions = Pick<DelayQueueOptions, "scope" | "onPushed">;

/** Scopes in Lua's form, by scope: a server's views share their token's scope (one array). */
const luaScopes = new WeakMap<readonly string[], string>();

function luaScopeOf(scope: TopicScope): string {
  if (scope === undefined) return "";
  let lua = luaScopes.get(scope);
  if (lua === undefined) {
    lua = scopeToLua(scope);
    luaScopes.set(scope, lua);
  }
  return lua;
}

export class DelayQueue {
  private readonly shared: Shared;
  /** The topics this view may act on; undefined: all. */
  readonly scope: TopicScope;
  private readonly luaScope: string;
  private readonly onPushed: DelayQueueOptions["onPushed"];

  /**
   * @param shared internal: the state a scoped view shares with the queue it came from
   * @param view internal: what a view sets for itself (a server makes one per request, so it
   *   copies nothing)
   */
  constructor(
    private readonly options: DelayQueueOptions,
    shared?: Shared,
    view?: ViewOptions,
  ) {
    const { scope, onPushed } = view ?? options;
    this.scope = scope;
    this.onPushed = onPushed;
    this.luaScope = luaScopeOf(scope);
    this.shared = shared ?? share(options);
  }

  /** This queue limited to topics matching the patterns (see `DelayQueueOptions.scope`). */
  withScope(scope: TopicScope): DelayQueue {
    return new DelayQueue(this.options, this.shared, { scope, onPushed: this.onPushed });
  }

  /** This queue with another scope and push hook (a server makes one per request). */
  view(options: ViewOptions): DelayQueue {
    return new DelayQueue(this.options, this.shared, options);
  }

  /** The caller's clock: the queue's `clock` option, else Date.now. */
  get clock(): () => number {
    return this.shared.clock;
  }

  /** Whether scripts run on Redis's clock (no `clock` option): the one clock of all callers. */
  get onRedisClock(): boolean {
    return this.shared.scriptNow() === undefined;
  }

  /**
   * Adds a job. Re-adding an id that exists in the same topic returns the stored job unchanged
   * (`created: false`), unless `replace` is set and the job is not reserved.
   */
  async add(input: AddJobInput): Promise<AddResult> {
    const now = this.shared.clock();
    const fields = prepareAdd(input, now, this.shared.maxBodyBytes, (t) => this.allow(t));
    const [result] = await this.runAdds([fields]);
    if (result && "error" in result) throw new DelayqError(result.error.code, result.error.message);
    return result as AddResult;
  }

  /**
   * Adds up to 1000 jobs in one request. Each item is validated on its own: the result list has
   * one entry per item, a job or an error, in order.
   */
  async addBatch(inputs: readonly unknown[]): Promise<BatchItemResult[]> {
    if (!Array.isArray(inputs) || inputs.length === 0 || inputs.length > MAX_BATCH) {
      throw new DelayqError("invalid_request", `jobs: give 1 to ${MAX_BATCH} jobs in a batch`);
    }
    const now = this.shared.clock();
    const allow = (topic: string) => this.allow(topic);
    const { results, prepared, positions } = prepareBatch(
      inputs,
      now,
      this.shared.maxBodyBytes,
      allow,
    );
    const added = prepared.length > 0 ? await this.runAdds(prepared) : [];
    added.forEach((result, j) => {
      results[positions[j] as number] = result;
    });
    return results;
  }

  private async runAdds(prepared: string[][]): Promise<BatchItemResult[]> {
    const { scripts, defaults, rawBodies } = this.shared;
    const now = this.shared.scriptNow();
    const { results, pushed } = await runAdds(scripts, defaults, prepared, now, rawBodies);
    for (const result of results) {
      if (!("created" in result) || !result.created) continue;
      const { job } = result;
      if (job.state === "ready") this.shared.wakeups.offer(job.topic);
      else this.shared.wakeups.dueAt(job.topic, job.dueAt);
    }
    if (pushed.length > 0) this.onPushed?.(pushed);
    return results;
  }

  /** Checks that Redis answers (one GET). Throws redis_unavailable when it does not. */
  async ping(): Promise<void> {
    try {
      await this.shared.redis.get(`${this.shared.keys.base}ping`);
    } catch (error) {
      throw redisError(error);
    }
  }

  /** The job with its current state. */
  async get(id: string): Promise<Job> {
    return readJob(this.shared, this.scope, id);
  }

  /**
   * Reserves up to `count` due jobs of a topic, earliest due first; each comes with a receipt.
   * With `wait` (seconds, up to 20) and nothing ready, waits for a job: it sleeps until the
   * topic's next due time or lease end, checks the topic's change counter once per poll
   * interval (one command), and wakes at once for adds made through this queue object. An
   * aborted `signal` ends the wait with no jobs (only its `aborted` is read, once a wait starts).
   */
  async pop(
    topic: string,
    options: { count?: number; wait?: number } = {},
    signal?: Pick<AbortSignal, "aborted">,
  ): Promise<Job[]> {
    this.allow(topic);
    const { count, wait } = parseInput(PopInput, options);
    return (await popJobs(this.shared, topic, count, wait, signal)).jobs;
  }

  /**
   * Finishes the jobs a consumer holds (what its last pop gave it: jobs, or `{id, receipt?}`
   * items, as `finishMany` takes them) and pops the next, in one script call, as BullMQ's worker
   * and JetStream's AckNext do: a consumer taking one job at a time makes one call a job instead
   * of two. The jobs are finished before anything is taken, each decided as `finish` would
   * (`finished`: one result per item, in order), and stay finished whatever the pop does next
   * (a wait, a push topic's refusal); a retry of the whole call finishes them again, which
   * answers the same.
   */
  async finishAndPop(
    topic: string,
    jobs: readonly (Job | { id: string; receipt?: string })[],
    options: { count?: number; wait?: number } = {},
    signal?: Pick<AbortSignal, "aborted">,
  ): Promise<{ jobs: Job[]; finished: FinishItemResult[] }> {
    this.allow(topic);
    const { count, wait } = parseInput(PopInput, options);
    const list = finishList(this.luaScope, finishItems(jobs), "finish");
    // Nothing valid to finish (args: the scope alone) is a plain pop, long-poll shortcut included.
    const finish = list.args.length > 1 ? list.args : [];
    const popped = await popJobs(this.shared, topic, count, wait, signal, finish);
    return { jobs: popped.jobs, finished: list.decided(popped.finished) };
  }

  /**
   * Ends this process's long-polls at once (each answers what it has: nothing) and every later
   * pop's wait: for a graceful shutdown, so that waiting callers get an answer before the server
   * closes. Shared by every view of the queue; there is no undoing it.
   */
  stopWaiting(): void {
    this.shared.wakeups.close();
  }

  /** Finishes a reserved job. Without a receipt, finishes it for whoever holds it. */
  async finish(id: string, options: { receipt?: string } = {}): Promise<void> {
    const { receipt } = parseInput(ReceiptInput, options);
    await finishOne(this.shared, this.luaScope, id, receipt ?? "");
  }

  /**
   * Finishes up to 100 reserved jobs in one script call: the jobs one pop gave (their id and
   * receipt count), or `{id, receipt?}` items (checked strictly, so that a misspelt `receipt` is
   * refused rather than ignored). Each is decided on its own, as `finish` would: one result per
   * item, in order, `{finished: true}` or `{error}` (a refused one leaves the rest finished).
   * An empty list (a pop that found nothing) does nothing and answers [].
   */
  async finishMany(
    jobs: readonly (Job | { id: string; receipt?: string })[],
  ): Promise<FinishItemResult[]> {
    return finishMany(this.shared, this.luaScope, finishItems(jobs));
  }

  /** Extends a reservation: the lease ends ttr from now. */
  async touch(id: string, options: { receipt?: string } = {}): Promise<Job> {
    const { receipt } = parseInput(ReceiptInput, options);
    return this.held("touch", id, [receipt ?? "", this.luaScope]);
  }

  /**
   * Gives a reserved job back, to wait `delay` seconds or its backoff step (or die). `undo`: a
   * job a pop took is given back as if the pop had not taken it (its attempt not counted, its due
   * time kept), for a caller that took more jobs than it hands out.
   */
  async release(
    id: string,
    options: { receipt?: string; delay?: number; error?: string; undo?: boolean } = {},
  ): Promise<Job> {
    const { undo, ...rest } = options;
    const { receipt, delay, error } = parseInput(ReleaseInput, rest);
    const wait = delay === undefined ? "" : Math.round(delay * 1000);
    const args = [receipt ?? "", this.luaScope, wait, undo ? "undo" : "", errorField(error ?? "")];
    const job = await this.held("release", id, args);
    if (job.state === "ready") this.shared.wakeups.offer(job.topic);
    else if (job.state === "delayed") this.shared.wakeups.dueAt(job.topic, job.dueAt);
    return job;
  }

  /** Moves a reserved job to its topic's dead letter (`error`: why, kept as its lastError). */
  async bury(id: string, options: { receipt?: string; error?: string } = {}): Promise<Job> {
    const { receipt, error } = parseInput(BuryInput, options);
    return this.held("bury", id, [receipt ?? "", this.luaScope, errorField(error ?? "")]);
  }

  /**
   * Gives a delayed or ready job a new due time, `delay` seconds from now or `runAt` (unix ms or
   * ISO-8601; a time past means due now). Its attempts, body and id stay. Another state (reserved,
   * a push job claimed for delivery, finished, dead, deleted) is refused with `invalid_state`.
   */
  async reschedule(id: string, options: { delay?: number; runAt?: number | string }): Promise<Job> {
    const input = parseInput(RescheduleInput, options);
    return moveJob(this.shared, "reschedule", id, this.luaScope, input, this.onPushed);
  }

  /** Makes a delayed job ready now; another state is refused with `invalid_state`. */
  async promote(id: string): Promise<Job> {
    return moveJob(this.shared, "promote", id, this.luaScope, {}, this.onPushed);
  }

  /** Deletes a job in any state; it is never handed out afterwards. */
  async delete(id: string): Promise<void> {
    parseInput(JobId, id, "job id");
    const { code, messageId } = await this.shared.scripts.run("delete", this.shared.scriptNow(), [
      id,
      this.luaScope,
    ]);
    if (code !== "ok") throw scriptError(code, { id });
    if (!messageId) return;
    try {
      await this.options.cancelDelivery?.(messageId);
    } catch (error) {
      // Deleted, but its delivery may still come: say so with a 503, and a repeated delete
      // (which the record lets cancel again) makes sure.
      // Why (which may quote QStash's URL) is for the log; the caller is told what to do.
      throw new DelayqError(
        "qstash_unavailable",
        "The job is deleted, but QStash did not confirm cancelling its delivery: retry the delete, which cancels it again",
        { cause: error, detail: messageOf(error) },
      );
    }
  }

  /** Moves dead jobs back to ready with attempts reset: the given ids, or the `count` oldest. */
  async kick(topic: string, options: { ids?: string[]; count?: number } = {}): Promise<number> {
    const kicked = await this.deadLetter("kick", topic, options);
    if (kicked > 0) this.shared.wakeups.offer(topic, kicked);
    return kicked;
  }

  /** Deletes dead jobs: the given ids, or the `count` oldest. */
  async deleteDead(
    topic: string,
    options: { ids?: string[]; count?: number } = {},
  ): Promise<number> {
    return this.deadLetter("deleteDead", topic, options);
  }

  /** A page of a topic's jobs in one state. Pass the returned cursor to get the next page. */
  async list(
    topic: string,
    options: { state: ListableState; cursor?: string; limit?: number },
  ): Promise<JobPage> {
    this.allow(topic);
    return readJobPage(this.shared, topic, options);
  }

  /**
   * Sets a topic's config (job defaults, paused, push), replacing the previous one, and answers
   * it as stored. A push config without a secret keeps the one stored before, else gets a new
   * one.
   */
  async configure(topic: string, config: z.input<typeof TopicConfig>): Promise<TopicConfig> {
    return (await this.setConfig(topic, config, "put")).config;
  }

  /**
   * Changes some fields of a topic's config: those given replace the stored ones, a field set to
   * null is removed, the others stay. Answers the whole config as stored.
   */
  async updateConfig(topic: string, patch: z.input<typeof TopicConfigPatch>): Promise<TopicConfig> {
    return (await this.setConfig(topic, patch, "patch")).config;
  }

  /** configure or updateConfig, and whether a push secret was generated (shown once). */
  async setConfig(
    topic: string,
    input: unknown,
    mode: "put" | "patch",
  ): Promise<{ config: TopicConfig; secretGenerated: boolean }> {
    this.allow(topic);
    const set = await setTopicConfig(this.shared, topic, input, mode);
    // Jobs already waiting became claimable: those due now go out at once, not at the next tick.
    const push = set.config.push;
    if (push) this.onPushed?.([{ topic, via: push.via ?? "direct", dueAt: this.shared.clock() }]);
    return set;
  }

  /** Counts per state, the earliest due time and the config of one topic. */
  async topic(topic: string): Promise<TopicStats> {
    this.allow(topic);
    return readTopicStats(this.shared, topic);
  }

  /** A page of topics by name, with their stats. */
  async topics(options: { after?: string; limit?: number } = {}): Promise<TopicPage> {
    return readTopicPage(this.shared, this.scope, options);
  }

  /**
   * Opens a dashboard session (src/http/pages/session.ts) for `ttlMs`: `key` is a digest of its id,
   * `tokenId` the id of the token it was opened with (scripts/sessions.ts).
   */
  async openSession(key: string, tokenId: string, ttlMs: number): Promise<void> {
    await this.shared.scripts.run("sessionStart", this.shared.clock(), [key, tokenId, ttlMs]);
  }

  /** The token id of the dashboard session `key`, or undefined when it has ended or expired. */
  sessionToken(key: string): Promise<string | undefined> {
    return this.shared.scripts.run("sessionRead", this.shared.clock(), [key]);
  }

  /** Ends the dashboard session `key` (sign-out). */
  async endSession(key: string): Promise<void> {
    await this.shared.scripts.run("sessionEnd", this.shared.clock(), [key]);
  }

  /**
   * The deployment's random secret for sealing the cursors of topic pages (src/http/
   * topic-cursors.ts): made in Redis by the first call anywhere, and read again after a minute, or
   * when `fresh` (a cursor that did not open), so that a process follows a secret made anew (the
   * key lost in a flush or a failover) instead of refusing other processes' cursors until it
   * restarts.
   */
  cursorSecret(options: { fresh?: boolean } = {}): Promise<string> {
    const shared = this.shared;
    const now = shared.clock();
    if (!shared.cursorSecret || options.fresh || now - shared.cursorSecret.at >= 60_000) {
      const secret = readCursorSecret(shared);
      shared.cursorSecret = { secret, at: now };
      secret.catch(() => {
        shared.cursorSecret = undefined; // Redis failed: the next call asks again.
      });
    }
    return shared.cursorSecret.secret;
  }

  /**
   * One slice of the scheduler's work: promote due jobs and take back expired reservations of
   * the topics whose next event is due, at most 500 jobs (a few ms of Redis time at 1M jobs).
   * `more` says whether work is left. Safe to run concurrently: each slice is one atomic script.
   */
  async tickSlice(now?: number): Promise<TickSlice> {
    const at = now ?? this.shared.scriptNow();
    // The partitions' upkeep is the runner's (redis/routing.ts), not the caller's.
    const { upkeep: _, ...slice } = await this.shared.scripts.run("tick", at, [
      TICK_SLICE.jobs,
      TICK_SLICE.topics,
    ]);
    return slice;
  }

  /** Validates a topic name and checks this view may act on it. */
  private allow(topic: string): void {
    parseInput(TopicName, topic, "topic");
    if (!scopeAllows(this.scope, topic)) {
      throw new DelayqError("forbidden", `This token may not act on topic "${topic}"`);
    }
  }

  /** Runs a verb on a job the caller must hold; answers the job after the change. */
  private held(
    verb: Exclude<HeldVerb, "finish">,
    id: string,
    args: (string | number)[],
  ): Promise<Job> {
    return runHeld(this.shared, verb, id, args);
  }

  private async deadLetter(
    script: "kick" | "deleteDead",
    topic: string,
    options: { ids?: string[]; count?: number },
  ): Promise<number> {
    this.allow(topic);
    const { ids, count } = parseInput(KickInput, options);
    const selection = ids ? ["", ...ids] : [count ?? 1000];
    return this.shared.scripts.run(script, this.shared.scriptNow(), [topic, ...selection]);
  }
}

const JOB_FIELDS = new Set(Object.keys(Job.shape));

/**
 * A job as the queue answers it (pop, get), rather than an item made by hand: it has a state and
 * a topic, and no field a job does not have (so that a misspelt `receipt` beside them is still
 * refused by the strict item check).
 */
function isJob(item: unknown): item is Job {
  return (
    typeof item === "object" &&
    item !== null &&
    "state" in item &&
    "topic" in item &&
    Object.keys(item).every((field) => JOB_FIELDS.has(field))
  );
}

/** Jobs to finish as `{id, receipt}` items: a job the queue answered gives its id and receipt. */
function finishItems(jobs: readonly unknown[]): readonly unknown[] {
  return Array.isArray(jobs)
    ? jobs.map((job) => (isJob(job) ? { id: job.id, receipt: job.receipt } : job))
    : jobs;
}
