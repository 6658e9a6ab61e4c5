// DelayQueue: the library's public API. Each operation is one Lua script, so one REST request.
import type { z } from "zod";
import { DelayqError, parseInput } from "../domain/errors";
import type { AddResult, BatchItemResult, JobPage, TickSlice, TopicPage } from "../domain/results";
import {
  type AddJobInput,
  type Backoff,
  Backoff as BackoffSchema,
  type Job,
  JobId,
  KickInput,
  type ListableState,
  ListInput,
  MAX_BATCH,
  PopInput,
  ReceiptInput,
  ReleaseInput,
  TopicConfig,
  TopicConfigPatch,
  TopicName,
  type TopicStats,
} from "../domain/schemas";
import { scopeAllows, scopeToLua, type TopicScope } from "../domain/scope";
import { type Keys, keys } from "../redis/keys";
import { deleteDead, kick } from "../redis/lua/scripts/dead-letter";
import { deleteJob } from "../redis/lua/scripts/delete";
import { bury, finish, type HeldReply, release, touch } from "../redis/lua/scripts/held";
import { list } from "../redis/lua/scripts/list";
import { pop } from "../redis/lua/scripts/pop";
import { tick } from "../redis/lua/scripts/tick";
import { configure, listTopics, type TopicRow, topicStats } from "../redis/lua/scripts/topics";
import { decodeRecord } from "../redis/record";
import {
  createScriptRunner,
  type RedisClient,
  redisError,
  type ScriptRunner,
} from "../redis/runner";
import { type PushedTopic, prepareAdd, runAdds } from "./add-batch";
import { type HeldVerb, notFound, scriptError } from "./errors";
import { Wakeups } from "./long-poll";

export type DelayQueueOptions = {
  /** An `@upstash/redis` client (`Redis` from "@upstash/redis" or "@upstash/redis/cloudflare"). */
  redis: RedisClient;
  /** Key prefix; every key lives under the Redis Cluster hash tag `{prefix}`. @default "dq" */
  prefix?: string;
  /** The clock, unix ms. Every script gets `now` from it. @default Date.now */
  clock?: () => number;
  /** How long finished and deleted records are kept, in seconds. @default 3600 */
  retention?: number;
  /** Defaults for jobs whose topic config does not set them. @default ttr 60 s, 10 attempts, no backoff */
  defaults?: { ttr?: number; maxAttempts?: number; backoff?: Backoff };
  /** Largest job body, in bytes of JSON text. @default 262144 (256 KiB) */
  maxBodyBytes?: number;
  /**
   * How often a long-polling pop checks the topic's change counter (one GET) while it waits,
   * ms. It also wakes at the next known due time or lease end, and at once when this process
   * adds to the topic. @default 1000
   */
  pollIntervalMs?: number;
  /**
   * Jobs come back with `body` as a RawJson (the stored JSON text) instead of a parsed value, so
   * that a server can answer them byte for byte (the HTTP app does). @default false
   */
  rawBodies?: boolean;
  /**
   * Called after jobs were written to push topics, with each topic's earliest due job written,
   * so that a server can deliver those due soon without waiting for the next tick.
   */
  onPushed?: (pushed: PushedTopic[]) => void;
  /**
   * Cancels a push job's pending QStash message; `delete` awaits it before it answers, so a
   * deleted job is never delivered after its delete was acknowledged.
   */
  cancelDelivery?: (messageId: string) => Promise<void>;
  /**
   * The topics this queue object may act on, as patterns (`*` is a wildcard); acting on any
   * other topic, or on a job of another topic, fails with `forbidden`, and `topics()` lists only
   * matching ones. Scripts enforce it for jobs addressed by id, in the same request.
   * @default undefined: every topic
   */
  scope?: TopicScope;
};

export const DEFAULT_TTR_SECONDS = 60;
export const DEFAULT_MAX_ATTEMPTS = 10;
export const DEFAULT_RETENTION_SECONDS = 3600;
export const DEFAULT_MAX_BODY_BYTES = 256 * 1024;
/** Jobs and topics one tick script call may handle. */
export const TICK_SLICE = { jobs: 1000, topics: 100 } as const;

/** What every scoped view of one queue shares: the client, the scripts, the long-poll wakeups. */
type Shared = {
  redis: RedisClient;
  scripts: ScriptRunner;
  keys: Keys;
  clock: () => number;
  maxBodyBytes: number;
  defaults: [ttr: string, maxAttempts: string, backoff: string];
  pollIntervalMs: number;
  wakeups: Wakeups;
  rawBodies: boolean;
};

export class DelayQueue {
  private readonly shared: Shared;
  /** The topics this view may act on; undefined: all. */
  readonly scope: TopicScope;
  private readonly luaScope: string;

  /** @param shared internal: the state a scoped view shares with the queue it came from */
  constructor(
    private readonly options: DelayQueueOptions,
    shared?: Shared,
  ) {
    this.scope = options.scope;
    this.luaScope = scopeToLua(options.scope);
    this.shared = shared ?? share(options);
  }

  /** This queue limited to topics matching the patterns (see `DelayQueueOptions.scope`). */
  withScope(scope: TopicScope): DelayQueue {
    return new DelayQueue({ ...this.options, scope }, this.shared);
  }

  /** This queue with another scope and push hook (a server makes one per request). */
  view(options: Pick<DelayQueueOptions, "scope" | "onPushed">): DelayQueue {
    return new DelayQueue({ ...this.options, ...options }, this.shared);
  }

  /** The clock scripts get their `now` from. */
  get clock(): () => number {
    return this.shared.clock;
  }

  /**
   * Adds a job. Re-adding an id that exists in the same topic returns the stored job unchanged
   * (`created: false`), unless `replace` is set and the job is not reserved.
   */
  async add(input: AddJobInput): Promise<AddResult> {
    const now = this.shared.clock();
    const fields = prepareAdd(input, now, this.shared.maxBodyBytes, (t) => this.allow(t));
    const [result] = await this.runAdds([fields], now);
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
    const results: BatchItemResult[] = new Array(inputs.length);
    const prepared: string[][] = [];
    const positions: number[] = [];
    inputs.forEach((input, i) => {
      try {
        const allow = (topic: string) => this.allow(topic);
        prepared.push(prepareAdd(input, now, this.shared.maxBodyBytes, allow, `jobs.${i}`));
        positions.push(i);
      } catch (error) {
        if (!(error instanceof DelayqError)) throw error;
        results[i] = { error: error.toJSON() };
      }
    });
    const added = prepared.length > 0 ? await this.runAdds(prepared, now) : [];
    added.forEach((result, j) => {
      results[positions[j] as number] = result;
    });
    return results;
  }

  private async runAdds(prepared: string[][], now: number): Promise<BatchItemResult[]> {
    const { scripts, defaults, rawBodies } = this.shared;
    const { results, pushed } = await runAdds(scripts, defaults, prepared, now, rawBodies);
    for (const result of results) {
      if (!("created" in result) || !result.created) continue;
      const { job } = result;
      if (job.state === "ready") this.shared.wakeups.offer(job.topic);
      else this.shared.wakeups.dueAt(job.topic, job.dueAt);
    }
    if (pushed.length > 0) this.options.onPushed?.(pushed);
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
    parseInput(JobId, id, "job id");
    let raw: unknown;
    try {
      raw = await this.shared.redis.get(this.shared.keys.job(id));
    } catch (error) {
      throw redisError(error);
    }
    if (raw === null || raw === undefined) throw notFound(id);
    const job = decodeRecord(raw, this.shared.clock(), this.shared.rawBodies);
    if (!scopeAllows(this.scope, job.topic)) throw notFound(id);
    return job;
  }

  /**
   * Reserves up to `count` due jobs of a topic, earliest due first; each comes with a receipt.
   * With `wait` (seconds, up to 20) and nothing ready, waits for a job: it sleeps until the
   * topic's next due time or lease end, checks the topic's change counter once per poll
   * interval (one command), and wakes at once for adds made through this queue object. An
   * aborted `signal` ends the wait with no jobs.
   */
  async pop(
    topic: string,
    options: { count?: number; wait?: number } = {},
    signal?: AbortSignal,
  ): Promise<Job[]> {
    this.allow(topic);
    const { count, wait } = parseInput(PopInput, options);
    const giveUpAt = Date.now() + wait * 1000;
    const { scripts, clock } = this.shared;
    for (;;) {
      const now = clock();
      const reply = await scripts.run(pop, now, [topic, count, randomHex(6)]);
      if ("pushTopic" in reply) throw scriptError("pushTopic", { id: topic });
      this.shared.wakeups.popped(topic, reply.records.length >= count);
      if (reply.records.length > 0)
        return reply.records.map((raw) => decodeRecord(raw, now, this.shared.rawBodies));
      if (!("seq" in reply) || wait === 0) return [];
      const woke = await this.shared.wakeups.wait({
        redis: this.shared.redis,
        topic,
        metaKey: this.shared.keys.meta(topic),
        nextAt: reply.nextAt,
        seq: reply.seq,
        giveUpAt,
        pollIntervalMs: this.shared.pollIntervalMs,
        clock,
        signal,
      });
      if (!woke) return [];
    }
  }

  /** Finishes a reserved job. Without a receipt, finishes it for whoever holds it. */
  async finish(id: string, options: { receipt?: string } = {}): Promise<void> {
    const { receipt } = parseInput(ReceiptInput, options);
    await this.held("finish", id, [receipt ?? "", this.luaScope]);
  }

  /** Extends a reservation: the lease ends ttr from now. */
  async touch(id: string, options: { receipt?: string } = {}): Promise<Job> {
    const { receipt } = parseInput(ReceiptInput, options);
    return this.held("touch", id, [receipt ?? "", this.luaScope]);
  }

  /** Gives a reserved job back, to wait `delay` seconds or its backoff step (or die). */
  async release(id: string, options: { receipt?: string; delay?: number } = {}): Promise<Job> {
    const { receipt, delay } = parseInput(ReleaseInput, options);
    const wait = delay === undefined ? "" : Math.round(delay * 1000);
    const job = await this.held("release", id, [receipt ?? "", this.luaScope, wait]);
    if (job.state === "ready") this.shared.wakeups.offer(job.topic);
    else if (job.state === "delayed") this.shared.wakeups.dueAt(job.topic, job.dueAt);
    return job;
  }

  /** Moves a reserved job to its topic's dead letter. */
  async bury(id: string, options: { receipt?: string } = {}): Promise<Job> {
    const { receipt } = parseInput(ReceiptInput, options);
    return this.held("bury", id, [receipt ?? "", this.luaScope]);
  }

  /** Deletes a job in any state; it is never handed out afterwards. */
  async delete(id: string): Promise<void> {
    parseInput(JobId, id, "job id");
    const { code, messageId } = await this.shared.scripts.run(deleteJob, this.shared.clock(), [
      id,
      this.luaScope,
    ]);
    if (code !== "ok") throw scriptError(code, { id });
    if (messageId) await this.options.cancelDelivery?.(messageId);
  }

  /** Moves dead jobs back to ready with attempts reset: the given ids, or the `count` oldest. */
  async kick(topic: string, options: { ids?: string[]; count?: number } = {}): Promise<number> {
    const kicked = await this.deadLetter(kick, topic, options);
    if (kicked > 0) this.shared.wakeups.offer(topic, kicked);
    return kicked;
  }

  /** Deletes dead jobs: the given ids, or the `count` oldest. */
  async deleteDead(
    topic: string,
    options: { ids?: string[]; count?: number } = {},
  ): Promise<number> {
    return this.deadLetter(deleteDead, topic, options);
  }

  /** A page of a topic's jobs in one state. Pass the returned cursor to get the next page. */
  async list(
    topic: string,
    options: { state: ListableState; cursor?: string; limit?: number },
  ): Promise<JobPage> {
    this.allow(topic);
    const { state, cursor, limit } = parseInput(ListInput, options);
    const now = this.shared.clock();
    const page = await this.shared.scripts.run(list, now, [topic, state, cursor ?? "0", limit]);
    const jobs = page.records.map((raw) => decodeRecord(raw, now, this.shared.rawBodies));
    return page.cursor === undefined ? { jobs } : { jobs, cursor: page.cursor };
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
    const parsed =
      mode === "put"
        ? parseInput(TopicConfig, input, "topic config")
        : parseInput(TopicConfigPatch, input, "topic config");
    const reply = await this.shared.scripts.run(configure, this.shared.clock(), [
      topic,
      JSON.stringify(parsed),
      mode,
      newSecret(),
    ]);
    this.shared.wakeups.broadcast(topic);
    return { config: readConfig(reply.config), secretGenerated: reply.secretGenerated };
  }

  /** Counts per state, the earliest due time and the config of one topic. */
  async topic(topic: string): Promise<TopicStats> {
    this.allow(topic);
    const [row] = await this.shared.scripts.run(topicStats, this.shared.clock(), [topic]);
    return toStats(row as TopicRow);
  }

  /** A page of topics by name, with their stats. */
  async topics(options: { after?: string; limit?: number } = {}): Promise<TopicPage> {
    const limit = options.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
      throw new DelayqError("invalid_request", "limit: must be an integer from 1 to 100");
    }
    if (options.after !== undefined) parseInput(TopicName, options.after, "cursor");
    const page = await this.shared.scripts.run(listTopics, this.shared.clock(), [
      options.after ?? "",
      limit,
    ]);
    const last = page.topics[page.topics.length - 1];
    const topics = page.topics
      .filter((row) => scopeAllows(this.scope, row.topic))
      .map((row) => toStats(row));
    return page.more && last ? { topics, cursor: last.topic } : { topics };
  }

  /**
   * One slice of the scheduler's work: promote due jobs and take back expired reservations of
   * the topics whose next event is due, at most 1000 jobs. `more` says whether work is left.
   * Safe to run concurrently: each slice is one atomic script.
   */
  async tickSlice(now: number = this.shared.clock()): Promise<TickSlice> {
    return this.shared.scripts.run(tick, now, [TICK_SLICE.jobs, TICK_SLICE.topics]);
  }

  /** Validates a topic name and checks this view may act on it. */
  private allow(topic: string): void {
    parseInput(TopicName, topic, "topic");
    if (!scopeAllows(this.scope, topic)) {
      throw new DelayqError("forbidden", `This token may not act on topic "${topic}"`);
    }
  }

  /** Runs a verb on a job the caller must hold; answers the job after the change. */
  private async held(verb: HeldVerb, id: string, args: (string | number)[]): Promise<Job> {
    parseInput(JobId, id, "job id");
    const now = this.shared.clock();
    const script = { finish, touch, release, bury }[verb];
    const reply: HeldReply = await this.shared.scripts.run(script, now, [id, ...args]);
    if (reply.code !== "ok") throw scriptError(reply.code, { id, state: reply.value, verb });
    return verb === "finish"
      ? (undefined as never)
      : decodeRecord(reply.value, now, this.shared.rawBodies);
  }

  private async deadLetter(
    script: typeof kick,
    topic: string,
    options: { ids?: string[]; count?: number },
  ): Promise<number> {
    this.allow(topic);
    const { ids, count } = parseInput(KickInput, options);
    const selection = ids ? ["", ...ids] : [count ?? 1000];
    return this.shared.scripts.run(script, this.shared.clock(), [topic, ...selection]);
  }
}

function share(options: DelayQueueOptions): Shared {
  const prefix = options.prefix ?? "dq";
  const defaults = options.defaults ?? {};
  const backoff =
    defaults.backoff === undefined ? undefined : parseInput(BackoffSchema, defaults.backoff);
  const retention = options.retention ?? DEFAULT_RETENTION_SECONDS;
  return {
    redis: options.redis,
    scripts: createScriptRunner(options.redis, prefix, Math.round(retention * 1000)),
    keys: keys(prefix),
    clock: options.clock ?? Date.now,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    defaults: [
      String((defaults.ttr ?? DEFAULT_TTR_SECONDS) * 1000),
      String(defaults.maxAttempts ?? DEFAULT_MAX_ATTEMPTS),
      backoff === undefined ? "" : JSON.stringify(backoff),
    ],
    pollIntervalMs: options.pollIntervalMs ?? 1000,
    wakeups: new Wakeups(),
    rawBodies: options.rawBodies ?? false,
  };
}

function toStats(row: TopicRow): TopicStats {
  const stats: TopicStats = {
    topic: row.topic,
    counts: { delayed: row.delayed, ready: row.ready, reserved: row.reserved, dead: row.dead },
    config: readConfig(row.config),
  };
  if (row.oldestDueAt !== undefined) stats.oldestDueAt = row.oldestDueAt;
  if (stats.config.push) stats.push = { delivered: row.delivered, failed: row.failed };
  return stats;
}

/** A topic config as stored (JSON written by Lua's cjson), "" for none. */
function readConfig(text: string): TopicConfig {
  const config = text ? (JSON.parse(text) as TopicConfig) : {};
  if (config.push === null) delete config.push;
  return config;
}

/** A push secret: 32 random bytes, base64url, with a prefix that says what it is. */
function newSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `dqwh_${btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "")}`;
}

function randomHex(bytes: number): string {
  const buffer = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(buffer, (b) => b.toString(16).padStart(2, "0")).join("");
}
