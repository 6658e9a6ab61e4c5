// The delay queue: each operation is one Lua script, so one REST request to Redis.
import { DelayqError, type ErrorCode, parseInput } from "./domain/errors";
import {
  AddJobInput,
  type Backoff,
  Backoff as BackoffSchema,
  type Job,
  JobId,
  KickInput,
  type ListableState,
  ListInput,
  MAX_BATCH,
  MAX_DELAY_SECONDS,
  PopInput,
  ReceiptInput,
  ReleaseInput,
  TopicConfig,
  TopicName,
  type TopicStats,
} from "./domain/schemas";
import { scopeAllows, scopeToLua, type TopicScope } from "./domain/scope";
import { type Keys, keys } from "./redis/keys";
import { CODE } from "./redis/lua/scripts";
import { decodeRecord } from "./redis/record";
import {
  createScriptRunner,
  type RedisClient,
  redisError,
  type ScriptRunner,
} from "./redis/scripts";

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
};

export type AddResult = { created: boolean; job: Job };
export type BatchItemResult = AddResult | { error: { code: ErrorCode; message: string } };
export type TickSlice = {
  promoted: number;
  expired: number;
  died: number;
  topics: number;
  more: boolean;
};
export type JobPage = { jobs: Job[]; cursor?: string };
export type TopicPage = { topics: TopicStats[]; cursor?: string };

export const DEFAULT_TTR_SECONDS = 60;
export const DEFAULT_MAX_ATTEMPTS = 10;
export const DEFAULT_RETENTION_SECONDS = 3600;
export const DEFAULT_MAX_BODY_BYTES = 256 * 1024;
/** Script arguments per add request before a batch is split (Upstash takes 10 MB per request). */
const MAX_ADD_ARG_BYTES = 4 * 1024 * 1024;
/** Jobs per add script call: a 1000-job batch is four calls pipelined in one request. */
const ADD_SLICE = 250;
/** Jobs and topics one tick script call may handle. */
export const TICK_SLICE = { jobs: 1000, topics: 100 } as const;

const utf8 = new TextEncoder();

export class DelayQueue {
  private readonly scripts: ScriptRunner;
  private readonly redis: RedisClient;
  private readonly keys: Keys;
  private readonly clock: () => number;
  private readonly maxBodyBytes: number;
  private readonly defaultArgs: [string, string, string];
  private readonly pollIntervalMs: number;
  /** Long-polls waiting in this process, by topic: woken at once by this process's writes. */
  private readonly waiters = new Map<string, Set<() => void>>();
  /** The topics this view may act on (see withScope); undefined: all. */
  private readonly scope: TopicScope = undefined;
  private readonly luaScope: string = "";

  constructor(options: DelayQueueOptions) {
    this.redis = options.redis;
    const prefix = options.prefix ?? "dq";
    this.keys = keys(prefix);
    this.clock = options.clock ?? Date.now;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    const retention = options.retention ?? DEFAULT_RETENTION_SECONDS;
    this.scripts = createScriptRunner(options.redis, prefix, Math.round(retention * 1000));
    const defaults = options.defaults ?? {};
    const backoff =
      defaults.backoff === undefined ? undefined : parseInput(BackoffSchema, defaults.backoff);
    this.defaultArgs = [
      String((defaults.ttr ?? DEFAULT_TTR_SECONDS) * 1000),
      String(defaults.maxAttempts ?? DEFAULT_MAX_ATTEMPTS),
      backoff === undefined ? "" : JSON.stringify(backoff),
    ];
  }

  /**
   * A view of this queue limited to topics matching the patterns (`*` is a wildcard): acting on
   * any other topic, or on a job of another topic, fails with `forbidden`, and `topics()` lists
   * only matching topics. Scripts enforce it for jobs addressed by id, in the same request.
   */
  withScope(scope: TopicScope): DelayQueue {
    return Object.create(this, {
      scope: { value: scope },
      luaScope: { value: scopeToLua(scope) },
    }) as DelayQueue;
  }

  /**
   * Adds a job. Re-adding an id that exists in the same topic returns the stored job unchanged
   * (`created: false`), unless `replace` is set and the job is not reserved.
   */
  async add(input: AddJobInput): Promise<AddResult> {
    const now = this.clock();
    const [result] = await this.addPrepared([this.prepare(input, now)], now);
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
    const now = this.clock();
    const results: BatchItemResult[] = new Array(inputs.length);
    const prepared: string[][] = [];
    const positions: number[] = [];
    inputs.forEach((input, i) => {
      try {
        prepared.push(this.prepare(input as AddJobInput, now, `jobs.${i}`));
        positions.push(i);
      } catch (error) {
        if (!(error instanceof DelayqError)) throw error;
        results[i] = { error: error.toJSON() };
      }
    });
    const added = prepared.length > 0 ? await this.addPrepared(prepared, now) : [];
    added.forEach((result, j) => {
      results[positions[j] as number] = result;
    });
    return results;
  }

  /** Checks that Redis answers (one GET). Throws redis_unavailable when it does not. */
  async ping(): Promise<void> {
    try {
      await this.redis.get(`${this.keys.base}ping`);
    } catch (error) {
      throw redisError(error);
    }
  }

  /** The job with its current state. */
  async get(id: string): Promise<Job> {
    parseInput(JobId, id, "job id");
    let raw: unknown;
    try {
      raw = await this.redis.get(this.keys.job(id));
    } catch (error) {
      throw redisError(error);
    }
    if (raw === null || raw === undefined) throw notFound(id);
    const job = decodeRecord(raw, this.clock());
    if (!scopeAllows(this.scope, job.topic)) throw forbiddenJob(id);
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
    for (;;) {
      const now = this.clock();
      const [nextAt, seq, ...records] = (await this.scripts.run("pop", now, [
        topic,
        count,
        randomHex(6),
      ])) as [number, number, ...unknown[]];
      if (records.length > 0) return records.map((raw) => decodeRecord(raw, now));
      const woke = await this.waitForChange(topic, Number(nextAt), Number(seq), giveUpAt, signal);
      if (!woke) return [];
    }
  }

  /**
   * Sleeps until something may be ready in the topic: its next due time passes, its change
   * counter moves, or this process writes to it. False when the wait is over first.
   */
  private async waitForChange(
    topic: string,
    nextAt: number,
    seq: number,
    giveUpAt: number,
    signal?: AbortSignal,
  ): Promise<boolean> {
    const wakeAt = nextAt >= 0 ? nextAt : Number.POSITIVE_INFINITY;
    for (;;) {
      const left = giveUpAt - Date.now();
      if (left <= 0 || signal?.aborted) return false;
      const untilDue = Math.max(0, wakeAt - this.clock());
      const nap = Math.min(left, this.pollIntervalMs, untilDue);
      if (await this.sleep(topic, nap, signal)) return !signal?.aborted;
      if (this.clock() >= wakeAt) return true;
      if (Date.now() >= giveUpAt || signal?.aborted) return false;
      let current: unknown;
      try {
        current = await this.redis.get(this.keys.seq(topic));
      } catch (error) {
        throw redisError(error);
      }
      if (Number(current ?? 0) !== seq) return true;
    }
  }

  /** Sleeps `ms`; resolves true early when this process writes to the topic or `signal` aborts. */
  private sleep(topic: string, ms: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      let waiters = this.waiters.get(topic);
      if (!waiters) {
        waiters = new Set();
        this.waiters.set(topic, waiters);
      }
      const done = (early: boolean) => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (waiters.size === 0) this.waiters.delete(topic);
        signal?.removeEventListener("abort", wake);
        resolve(early);
      };
      const wake = () => done(true);
      const timer = setTimeout(() => done(false), ms);
      waiters.add(wake);
      signal?.addEventListener("abort", wake);
    });
  }

  /** Wakes this process's long-polls on the topics written to. */
  private notify(topics: Iterable<string>): void {
    for (const topic of topics) {
      for (const wake of [...(this.waiters.get(topic) ?? [])]) wake();
    }
  }

  /** Finishes a reserved job. Without a receipt, finishes it for whoever holds it. */
  async finish(id: string, options: { receipt?: string } = {}): Promise<void> {
    const { receipt } = parseInput(ReceiptInput, options);
    await this.held("finish", id, this.clock(), [receipt ?? "", this.luaScope]);
  }

  /** Extends a reservation: the lease ends ttr from now. */
  async touch(id: string, options: { receipt?: string } = {}): Promise<Job> {
    const { receipt } = parseInput(ReceiptInput, options);
    const now = this.clock();
    return decodeRecord(await this.held("touch", id, now, [receipt ?? "", this.luaScope]), now);
  }

  /** Gives a reserved job back, to wait `delay` seconds or its backoff step (or die). */
  async release(id: string, options: { receipt?: string; delay?: number } = {}): Promise<Job> {
    const { receipt, delay } = parseInput(ReleaseInput, options);
    const wait = delay === undefined ? "" : Math.round(delay * 1000);
    const now = this.clock();
    const args = [receipt ?? "", this.luaScope, wait];
    const job = decodeRecord(await this.held("release", id, now, args), now);
    this.notify([job.topic]);
    return job;
  }

  /** Moves a reserved job to its topic's dead letter. */
  async bury(id: string, options: { receipt?: string } = {}): Promise<Job> {
    const { receipt } = parseInput(ReceiptInput, options);
    const now = this.clock();
    return decodeRecord(await this.held("bury", id, now, [receipt ?? "", this.luaScope]), now);
  }

  /** Deletes a job in any state; it is never handed out afterwards. */
  async delete(id: string): Promise<void> {
    parseInput(JobId, id, "job id");
    const [code] = (await this.scripts.run("delete", this.clock(), [id, this.luaScope])) as [
      number,
      string,
    ];
    if (code === CODE.notFound) throw notFound(id);
    if (code === CODE.forbidden) throw forbiddenJob(id);
  }

  /** Moves dead jobs back to ready with attempts reset: the given ids, or the `count` oldest. */
  async kick(topic: string, options: { ids?: string[]; count?: number } = {}): Promise<number> {
    return this.deadLetter("kick", topic, options);
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
    const { state, cursor, limit } = parseInput(ListInput, options);
    const now = this.clock();
    const [next, ...records] = (await this.scripts.run("list", now, [
      topic,
      state,
      cursor ?? "0",
      limit,
    ])) as [number | string, ...unknown[]];
    const jobs = records.map((raw) => decodeRecord(raw, now));
    // -1 on the last page; otherwise an offset, or "<slot>:<offset>" in the slot lists.
    return String(next) !== "-1" ? { jobs, cursor: String(next) } : { jobs };
  }

  /** Sets a topic's config: job defaults and whether it is paused. Replaces the previous one. */
  async configure(topic: string, config: TopicConfig): Promise<TopicConfig> {
    this.allow(topic);
    const parsed = parseInput(TopicConfig, config, "topic config");
    await this.scripts.run("configure", this.clock(), [topic, JSON.stringify(parsed)]);
    this.notify([topic]);
    return parsed;
  }

  /** Counts per state, the earliest due time and the config of one topic. */
  async topic(topic: string): Promise<TopicStats> {
    this.allow(topic);
    const flat = (await this.scripts.run("topicStats", this.clock(), [topic])) as unknown[];
    return readStats(flat)[0] as TopicStats;
  }

  /** A page of topics by name, with their stats. */
  async topics(options: { after?: string; limit?: number } = {}): Promise<TopicPage> {
    const limit = options.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
      throw new DelayqError("invalid_request", "limit: must be an integer from 1 to 100");
    }
    if (options.after !== undefined) parseInput(TopicName, options.after, "cursor");
    const [more, ...flat] = (await this.scripts.run("listTopics", this.clock(), [
      options.after ?? "",
      limit,
    ])) as unknown[];
    const page = readStats(flat);
    const last = page[page.length - 1];
    const topics = page.filter((stats) => scopeAllows(this.scope, stats.topic));
    return Number(more) === 1 && last ? { topics, cursor: last.topic } : { topics };
  }

  /**
   * One slice of the scheduler's work: promote due jobs and take back expired reservations of
   * the topics whose next event is due, at most 1000 jobs. `more` says whether work is left.
   * Safe to run concurrently: each slice is one atomic script.
   */
  async tickSlice(now: number = this.clock()): Promise<TickSlice> {
    const [promoted, expired, died, topics, more] = (await this.scripts.run("tick", now, [
      TICK_SLICE.jobs,
      TICK_SLICE.topics,
    ])) as [number, number, number, number, number];
    return { promoted, expired, died, topics, more: more === 1 };
  }

  /** Validates a topic name and checks this view may act on it. */
  private allow(topic: string): void {
    parseInput(TopicName, topic, "topic");
    if (!scopeAllows(this.scope, topic)) {
      throw new DelayqError("forbidden", `This token may not act on topic "${topic}"`);
    }
  }

  /** Validates one add and turns it into the script's ARGV fields. */
  private prepare(input: AddJobInput, now: number, what = "job"): string[] {
    const job = parseInput(AddJobInput, input, what);
    this.allow(job.topic);
    const body = toJson(job.body, what);
    const size = utf8.encode(body).length;
    if (size > this.maxBodyBytes) {
      throw new DelayqError(
        "payload_too_large",
        `${what}.body is ${size} bytes of JSON; the limit is ${this.maxBodyBytes}`,
      );
    }
    const due = job.runAt ?? now + Math.round((job.delay ?? 0) * 1000);
    if (due > now + MAX_DELAY_SECONDS * 1000) {
      throw new DelayqError("invalid_request", `${what}.runAt: must be at most a year from now`);
    }
    if (job.deadline !== undefined && job.deadline < due) {
      throw new DelayqError(
        "invalid_request",
        `${what}.deadline: must not be before the job is due (${new Date(due).toISOString()})`,
      );
    }
    return [
      job.id ?? crypto.randomUUID(),
      job.topic,
      String(due),
      job.ttr === undefined ? "" : String(job.ttr * 1000),
      job.maxAttempts === undefined ? "" : String(job.maxAttempts),
      job.backoff === undefined ? "" : JSON.stringify(job.backoff),
      job.deadline === undefined ? "" : String(job.deadline),
      job.replace ? "1" : "",
      body,
    ];
  }

  /**
   * Runs the add script over the prepared jobs: slices of at most 250 jobs, so that no script call
   * holds Redis for long, sent together so that the client pipelines them into one request
   * (batches over 4 MiB of arguments take more requests: Upstash takes 10 MB per request).
   * Slices run in order, so an id repeated across slices sees the earlier write.
   */
  private async addPrepared(prepared: string[][], now: number): Promise<BatchItemResult[]> {
    const requests: string[][][][] = [[[]]];
    let bytes = 0;
    for (const fields of prepared) {
      const size = fields.reduce((sum, field) => sum + field.length, 0);
      let request = requests[requests.length - 1] as string[][][];
      if (bytes + size > MAX_ADD_ARG_BYTES && bytes > 0) {
        request = [[]];
        requests.push(request);
        bytes = 0;
      }
      let slice = request[request.length - 1] as string[][];
      if (slice.length >= ADD_SLICE) {
        slice = [];
        request.push(slice);
      }
      slice.push(fields);
      bytes += size;
    }
    const [ttr, attempts, backoff] = this.defaultArgs;
    const results: BatchItemResult[] = [];
    for (const request of requests) {
      const outs = (await Promise.all(
        request.map((slice) =>
          this.scripts.run("add", now, [ttr, attempts, backoff, ...slice.flat()]),
        ),
      )) as unknown[][];
      for (const out of outs) {
        for (let i = 0; i < out.length; i += 2)
          results.push(addResult(out[i] as number, out[i + 1], now));
      }
    }
    this.notify(
      results.flatMap((result) =>
        "created" in result && result.created ? [result.job.topic] : [],
      ),
    );
    return results;
  }

  /**
   * Runs a script on a job the caller must hold and returns what it answers (the record, for all
   * but finish); turns its error codes into errors.
   */
  private async held(
    name: "finish" | "touch" | "release" | "bury",
    id: string,
    now: number,
    args: (string | number)[],
  ): Promise<unknown> {
    parseInput(JobId, id, "job id");
    const [code, value] = (await this.scripts.run(name, now, [id, ...args])) as [number, unknown];
    if (code === CODE.ok) return value;
    const state = String(value);
    switch (code) {
      case CODE.notFound:
        throw notFound(id);
      case CODE.forbidden:
        throw forbiddenJob(id);
      case CODE.notReserved:
        throw new DelayqError(
          "not_reserved",
          `Job ${id} is ${state}, not reserved: only a reserved job can be ${PAST[name]}`,
        );
      default:
        throw new DelayqError(
          "stale_receipt",
          `The receipt does not match job ${id}'s current reservation: the reservation it came ` +
            "from has ended (its lease ran out, and the job went back to the queue or on to " +
            "another consumer)",
        );
    }
  }

  private async deadLetter(
    name: "kick" | "deleteDead",
    topic: string,
    options: { ids?: string[]; count?: number },
  ): Promise<number> {
    this.allow(topic);
    const { ids, count } = parseInput(KickInput, options);
    const selection = ids ? ["", ...ids] : [count ?? 1000];
    const done = (await this.scripts.run(name, this.clock(), [topic, ...selection])) as number;
    if (name === "kick" && done > 0) this.notify([topic]);
    return done;
  }
}

const PAST = { finish: "finished", touch: "touched", release: "released", bury: "buried" };

function notFound(id: string): DelayqError {
  return new DelayqError(
    "job_not_found",
    `Job ${id} does not exist (finished and deleted jobs are forgotten after the retention window)`,
  );
}

function forbiddenJob(id: string): DelayqError {
  return new DelayqError(
    "forbidden",
    `This token may not act on job ${id}: its topic is not one of the token's`,
  );
}

function addResult(code: number, raw: unknown, now: number): BatchItemResult {
  if (code === CODE.ok || code === CODE.replaced)
    return { created: true, job: decodeRecord(raw, now) };
  if (code === CODE.existing) return { created: false, job: decodeRecord(raw, now) };
  const { id } = decodeRecord(raw, now);
  if (code === CODE.exists) {
    return {
      error: {
        code: "job_exists",
        message: `Job id ${id} is already used by another topic; ids are unique across topics`,
      },
    };
  }
  return {
    error: {
      code: "job_reserved",
      message: `Job ${id} is reserved by a consumer; replace works only on jobs not reserved`,
    },
  };
}

function readStats(flat: readonly unknown[]): TopicStats[] {
  const out: TopicStats[] = [];
  for (let i = 0; i + 6 < flat.length; i += 7) {
    const [topic, delayed, ready, reserved, dead, oldest, config] = flat.slice(i, i + 7);
    const stats: TopicStats = {
      topic: String(topic),
      counts: {
        delayed: Number(delayed),
        ready: Number(ready),
        reserved: Number(reserved),
        dead: Number(dead),
      },
      config: typeof config === "string" ? (config ? JSON.parse(config) : {}) : (config ?? {}),
    };
    if (Number(oldest) >= 0) stats.oldestDueAt = Number(oldest);
    out.push(stats);
  }
  return out;
}

/** The body's JSON text (undefined is null); a value JSON cannot hold is invalid_request. */
function toJson(body: unknown, what: string): string {
  try {
    return JSON.stringify(body ?? null);
  } catch (error) {
    throw new DelayqError(
      "invalid_request",
      `${what}.body: must be a JSON value (${error instanceof Error ? error.message : error})`,
    );
  }
}

function randomHex(bytes: number): string {
  const buffer = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(buffer, (b) => b.toString(16).padStart(2, "0")).join("");
}
