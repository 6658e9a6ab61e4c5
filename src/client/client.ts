// DelayqClient: the typed methods over delayq's HTTP API, one per route.
import {
  expectAddResult,
  expectField,
  expectRefundResult,
  expectWatchResult,
  invalidResponse,
} from "./answers";
import type { DelayqClientError } from "./errors";
import { type ClientOptions, transportOptions } from "./options";
import { segment, waitMs, withId } from "./requests";
import { type Answer, type Call, send, type TransportOptions } from "./transport";
import type {
  AddJobInput,
  AddResult,
  BatchItemResult,
  CommandInput,
  CommandResult,
  FinishItemResult,
  Health,
  Job,
  JobPage,
  KickOptions,
  ListJobsOptions,
  ListSchedulesOptions,
  Payment,
  PopOptions,
  ProviderName,
  Refund,
  RescheduleOptions,
  Schedule,
  ScheduleInput,
  SchedulePage,
  TopicConfig,
  TopicConfigInput,
  TopicConfigPatch,
  TopicPage,
  TopicStats,
  TopicsOptions,
  WatchPaymentInput,
  WatchRefundInput,
  WatchRefundResult,
  WatchResult,
} from "./types";
import { type JobHandler, type Worker, type WorkOptions, work } from "./worker";

/** Builds a client. It holds no connection; make one per process (or per Worker isolate). */
export function createClient(options: ClientOptions): DelayqClient {
  return new DelayqClient(options);
}

/**
 * The delayq API, typed. Every method rejects with {@link DelayqClientError}, except when the
 * caller's `signal` aborts (its reason is thrown as is).
 *
 * Retrying is safe for each call, because:
 * - `add`, `addBatch` and `command` add: the client gives every job without an id a random
 *   UUID before the first attempt, so a retry of an add that did land finds the job and
 *   answers `created: false` with it instead of adding a twin. (With `replace: true`, a retry
 *   replaces the job with the same content, or fails with `job_reserved` if a consumer popped
 *   it in between.)
 * - `watchPayment` and `watchRefund`: idempotent on the server by (provider, account,
 *   outTradeNo / outRefundNo): a retry of a start that did land answers `created: false` with
 *   the watch instead of starting a twin.
 * - `get`, `topic`, `topics`, `listJobs`, `getPayment`, `getRefund`, `getSchedule`,
 *   `listSchedules`, `health`: reads.
 * - `putSchedule`: a PUT of the whole schedule; put again as it is, it changes nothing.
 * - `finish`, `finishMany`, `delete`, `stopPayment` and `stopRefund`: idempotent on the server (finishing a
 *   finished job, deleting a deleted one, or stopping a stopped watch, succeeds).
 * - `touch`: extending a lease twice ends it at about the same time.
 * - `configureTopic`: a PUT of the whole config. `updateTopic`: a PATCH sets the same fields
 *   to the same values again. (For both, a push secret the server generated is shown in full
 *   only in the answer that generated it: if that answer was lost, the retry's shows it masked.)
 * - `reschedule`: to `runAt`, a retry sets the same time; with `delay`, a little later. `promote`:
 *   if the first attempt landed, the retry answers 409 `invalid_state` (the job is ready).
 * - `release` and `bury`: if the first attempt landed, the retry answers 409 `stale_receipt`
 *   (`not_reserved` without a receipt); the job did move, so a caller that sees that after a
 *   retry may treat it as done.
 * - `pop`: if the lost attempt reserved jobs, nobody receives them; they come back to the
 *   topic when their TTR runs out, with one more attempt counted.
 * - `kick` and `deleteDead` by `count`: a retry acts on up to `count` more dead jobs. By
 *   `ids`, a kick is idempotent.
 */
export class DelayqClient {
  private readonly transport: TransportOptions;

  constructor(options: ClientOptions) {
    this.transport = transportOptions(options);
  }

  /**
   * Adds a job (`POST /v1/jobs`). Without `id`, the client makes one (a UUID) so that retries
   * cannot add it twice. `created` is false when a job with that id already existed in the
   * topic: the stored job is returned unchanged.
   */
  async add(job: AddJobInput): Promise<AddResult> {
    const answer = await this.call({ method: "POST", path: "/v1/jobs", body: withId(job) });
    return expectAddResult(answer, answer.data);
  }

  /**
   * Adds up to 1000 jobs in one request (`POST /v1/jobs/batch`). Each item is validated and
   * added on its own: one result per item, in order, `{created, job}` or `{error}`. Items
   * without `id` get one from the client, as in `add`.
   */
  async addBatch(jobs: readonly AddJobInput[]): Promise<BatchItemResult[]> {
    const answer = await this.call({
      method: "POST",
      path: "/v1/jobs/batch",
      body: { jobs: jobs.map(withId) },
    });
    return expectField(answer, "results", "array") as BatchItemResult[];
  }

  /** The job and its current state (`GET /v1/jobs/{id}`). */
  async get(id: string): Promise<Job> {
    const answer = await this.call({ method: "GET", path: `/v1/jobs/${segment(id, "job id")}` });
    return expectField(answer, "job", "object") as Job;
  }

  /** Deletes a job in any state (`DELETE /v1/jobs/{id}`); deleting it again succeeds. */
  async delete(id: string): Promise<void> {
    const answer = await this.call({
      method: "DELETE",
      path: `/v1/jobs/${segment(id, "job id")}`,
    });
    expectField(answer, "deleted", "boolean");
  }

  /**
   * Reserves up to `count` ready jobs of a topic (`POST /v1/topics/{topic}/pop`), each with a
   * `receipt` and leased for its TTR. With `wait`, long-polls up to that many seconds for a job;
   * `[]` when none came.
   */
  async pop(topic: string, options: PopOptions = {}): Promise<Job[]> {
    const { signal, count, wait } = options;
    const answer = await this.call({
      method: "POST",
      path: `/v1/topics/${segment(topic, "topic")}/pop`,
      body: { count, wait },
      // The server holds the request open for `wait`: that time is not a timeout.
      timeoutMs: this.transport.timeoutMs + waitMs(wait),
      signal,
    });
    return expectField(answer, "jobs", "array") as Job[];
  }

  /**
   * Finishes the jobs the last pop gave and pops the next, in one request and one script call
   * (`POST /v1/topics/{topic}/pop` with `finish`), as BullMQ's worker and JetStream's AckNext
   * do: a consumer taking one job at a time makes one call a job instead of two. `finished` has
   * one result per job given, in order, as `finishMany` answers; the jobs are finished before
   * the pop takes any and stay finished whatever it does (a retry finishes them again, which
   * succeeds). `finishAndPop(topic, [])` is a pop.
   */
  async finishAndPop(
    topic: string,
    jobs: readonly { id: string; receipt?: string }[],
    options: PopOptions = {},
  ): Promise<{ jobs: Job[]; finished: FinishItemResult[] }> {
    const { signal, count, wait } = options;
    const answer = await this.call({
      method: "POST",
      path: `/v1/topics/${segment(topic, "topic")}/pop`,
      body: { count, wait, finish: finishItems(jobs) },
      timeoutMs: this.transport.timeoutMs + waitMs(wait),
      signal,
    });
    const finished = expectField(answer, "finished", "array") as FinishItemResult[];
    return { jobs: expectField(answer, "jobs", "array") as Job[], finished };
  }

  /**
   * Runs `handler` for each job of `topic` until stopped, like BullMQ's Worker (see
   * `WorkOptions`): each loop finishes the jobs it ran in the pop that takes its next ones, gives
   * a job back (release) when its handler throws, and extends a running job's lease every half
   * of its TTR. `await worker.stop()` lets the running handlers end and finishes their jobs.
   */
  work(topic: string, handler: JobHandler, options: WorkOptions = {}): Worker {
    return work(this, topic, handler, options);
  }

  /**
   * Finishes a reserved job (`POST /v1/jobs/{id}/finish`). With `receipt`, only that reservation
   * may finish it (else `stale_receipt`); finishing a finished job again succeeds.
   */
  async finish(id: string, options: { receipt?: string } = {}): Promise<void> {
    const answer = await this.call(this.verb(id, "finish", { receipt: options.receipt }));
    expectField(answer, "finished", "boolean");
  }

  /**
   * Finishes up to 100 reserved jobs in one request (`POST /v1/jobs/finish`): pass what `pop`
   * gave (only each job's `id` and `receipt` are sent), or `{id, receipt?}` items (sent as they
   * are, as is a job read with `get`, so the server refuses a misspelt field). One result per job, in order,
   * `{finished: true}` or `{error}`; a refused job leaves the others finished. An empty list (a
   * pop that found nothing) sends nothing and answers [].
   */
  async finishMany(jobs: readonly { id: string; receipt?: string }[]): Promise<FinishItemResult[]> {
    if (jobs.length === 0) return [];
    const answer = await this.call({
      method: "POST",
      path: "/v1/jobs/finish",
      body: { jobs: finishItems(jobs) },
    });
    return expectField(answer, "results", "array") as FinishItemResult[];
  }

  /** Extends a reservation by the job's TTR from now (`POST /v1/jobs/{id}/touch`). */
  async touch(id: string, options: { receipt?: string } = {}): Promise<Job> {
    const answer = await this.call(this.verb(id, "touch", { receipt: options.receipt }));
    return expectField(answer, "job", "object") as Job;
  }

  /**
   * Gives a reserved job back (`POST /v1/jobs/{id}/release`), to run again after `delay`
   * seconds, or after its backoff step when no delay is given (or to die, out of attempts).
   */
  async release(
    id: string,
    options: { receipt?: string; delay?: number; error?: string } = {},
  ): Promise<Job> {
    const { receipt, delay, error } = options;
    const answer = await this.call(this.verb(id, "release", { receipt, delay, error }));
    return expectField(answer, "job", "object") as Job;
  }

  /**
   * Moves a reserved job to its topic's dead letter (`POST /v1/jobs/{id}/bury`). `error` (up to
   * 1 KiB), here and in `release`: why the attempt failed, which the job then shows as
   * `lastError`.
   */
  async bury(id: string, options: { receipt?: string; error?: string } = {}): Promise<Job> {
    const { receipt, error } = options;
    const answer = await this.call(this.verb(id, "bury", { receipt, error }));
    return expectField(answer, "job", "object") as Job;
  }

  /**
   * Gives a delayed or ready job a new due time (`POST /v1/jobs/{id}/reschedule`): `delay`
   * seconds from now or `runAt` (unix ms or ISO-8601; a time past means due now). Any other
   * state answers 409 `invalid_state`.
   */
  async reschedule(id: string, options: RescheduleOptions): Promise<Job> {
    const { delay, runAt } = options;
    const answer = await this.call(this.verb(id, "reschedule", { delay, runAt }));
    return expectField(answer, "job", "object") as Job;
  }

  /** Makes a delayed job ready now (`POST /v1/jobs/{id}/promote`); else 409 `invalid_state`. */
  async promote(id: string): Promise<Job> {
    const answer = await this.call(this.verb(id, "promote", {}));
    return expectField(answer, "job", "object") as Job;
  }

  /**
   * Moves dead jobs back to ready with attempts reset (`POST /v1/topics/{topic}/kick`): the
   * given `ids`, or the `count` oldest (up to 1000 when neither is given). Returns how many.
   */
  async kick(topic: string, options: KickOptions = {}): Promise<number> {
    const answer = await this.call({
      method: "POST",
      path: `/v1/topics/${segment(topic, "topic")}/kick`,
      body: { ids: options.ids, count: options.count },
    });
    return expectField(answer, "kicked", "number") as number;
  }

  /**
   * Deletes a topic's `count` oldest dead jobs (`DELETE /v1/topics/{topic}/dead`; default and
   * most 1000). Returns how many.
   */
  async deleteDead(topic: string, options: { count?: number } = {}): Promise<number> {
    const answer = await this.call({
      method: "DELETE",
      path: `/v1/topics/${segment(topic, "topic")}/dead`,
      query: { count: options.count },
    });
    return expectField(answer, "deleted", "number") as number;
  }

  /**
   * A page of topics by name with their stats (`GET /v1/topics`); only the topics the token
   * may act on. Pass `cursor` back as `cursor` for the next page, while `hasMore`.
   */
  async topics(options: TopicsOptions = {}): Promise<TopicPage> {
    const answer = await this.call({
      method: "GET",
      path: "/v1/topics",
      query: { cursor: options.cursor ?? options.after, limit: options.limit },
    });
    expectField(answer, "topics", "array");
    return withHasMore(answer.data as TopicPage);
  }

  /** A topic's counts per state, earliest due time and config (`GET /v1/topics/{topic}`). */
  async topic(topic: string): Promise<TopicStats> {
    const answer = await this.call({
      method: "GET",
      path: `/v1/topics/${segment(topic, "topic")}`,
    });
    expectField(answer, "counts", "object");
    return answer.data as TopicStats;
  }

  /**
   * A page of a topic's jobs in one state (`GET /v1/topics/{topic}/jobs`). Pass `cursor` back
   * for the next page, while `hasMore`.
   */
  async listJobs(topic: string, options: ListJobsOptions): Promise<JobPage> {
    const answer = await this.call({
      method: "GET",
      path: `/v1/topics/${segment(topic, "topic")}/jobs`,
      query: { state: options.state, cursor: options.cursor, limit: options.limit },
    });
    expectField(answer, "jobs", "array");
    return withHasMore(answer.data as JobPage);
  }

  /**
   * Replaces a topic's config (`PUT /v1/topics/{topic}`): job defaults (ttr, maxAttempts,
   * backoff) for jobs added afterwards, and `paused`. Returns the config as stored, defaults
   * filled in.
   */
  async configureTopic(topic: string, config: TopicConfigInput): Promise<TopicConfig> {
    const answer = await this.call({
      method: "PUT",
      path: `/v1/topics/${segment(topic, "topic")}`,
      body: config,
    });
    return expectField(answer, "config", "object") as TopicConfig;
  }

  /**
   * Changes some fields of a topic's config (`PATCH /v1/topics/{topic}`): a field given replaces
   * the stored one, a field set to `null` is removed, a field left out is kept. Returns the
   * whole config as stored.
   */
  async updateTopic(topic: string, changes: TopicConfigPatch): Promise<TopicConfig> {
    const answer = await this.call({
      method: "PATCH",
      path: `/v1/topics/${segment(topic, "topic")}`,
      body: changes,
    });
    return expectField(answer, "config", "object") as TopicConfig;
  }

  /**
   * Starts watching an order at Alipay or WeChat Pay (`POST /v1/payments`): delayq queries the
   * provider on `schedule` (default: the provider's) until the order is paid, closed or failed,
   * or its `deadline` passes, and adds the outcome as a job to each `notify` topic. `account`
   * names one of the service's accounts (else `unknown_account`). Idempotent by (provider,
   * account, outTradeNo): `created` is false when the order was watched already, and the watch
   * is returned as it is.
   */
  async watchPayment(watch: WatchPaymentInput): Promise<WatchResult> {
    const answer = await this.call({ method: "POST", path: "/v1/payments", body: watch });
    return expectWatchResult(answer);
  }

  /**
   * A payment watch: its state, polls, last answer and outcome
   * (`GET /v1/payments/{provider}/{account}/{outTradeNo}`).
   */
  async getPayment(provider: ProviderName, account: string, outTradeNo: string): Promise<Payment> {
    const answer = await this.call({
      method: "GET",
      path: paymentPath(provider, account, outTradeNo),
    });
    return expectField(answer, "payment", "object") as Payment;
  }

  /**
   * Stops watching an order (`DELETE /v1/payments/{provider}/{account}/{outTradeNo}`): a
   * polling watch reads `stopped` from then on, one with an outcome keeps it, both while they
   * are retained; stopping it again succeeds.
   */
  async stopPayment(provider: ProviderName, account: string, outTradeNo: string): Promise<void> {
    const answer = await this.call({
      method: "DELETE",
      path: paymentPath(provider, account, outTradeNo),
    });
    expectField(answer, "deleted", "boolean");
  }

  /**
   * Starts watching a refund at Alipay or WeChat Pay (`POST /v1/refunds`): delayq queries the
   * provider on `schedule` (default: the `refund` preset, 1 min, 5, 10, 20, 30 min) until the
   * refund succeeds, closes or goes abnormal, or its `deadline` (default 7 days) passes, and adds
   * the outcome as a job to each `notify` topic. `outTradeNo` is required for Alipay.
   * Idempotent by (provider, account, outRefundNo): `created` is false when the refund was
   * watched already, and the watch is returned as it is.
   */
  async watchRefund(watch: WatchRefundInput): Promise<WatchRefundResult> {
    const answer = await this.call({ method: "POST", path: "/v1/refunds", body: watch });
    return expectRefundResult(answer);
  }

  /**
   * A refund watch: its state, queries, last answer and outcome
   * (`GET /v1/refunds/{provider}/{account}/{outRefundNo}`).
   */
  async getRefund(provider: ProviderName, account: string, outRefundNo: string): Promise<Refund> {
    const answer = await this.call({
      method: "GET",
      path: refundPath(provider, account, outRefundNo),
    });
    return expectField(answer, "refund", "object") as Refund;
  }

  /**
   * Stops watching a refund (`DELETE /v1/refunds/{provider}/{account}/{outRefundNo}`): a polling
   * watch reads `stopped` from then on, one with an outcome keeps it; stopping it again succeeds.
   */
  async stopRefund(provider: ProviderName, account: string, outRefundNo: string): Promise<void> {
    const answer = await this.call({
      method: "DELETE",
      path: refundPath(provider, account, outRefundNo),
    });
    expectField(answer, "deleted", "boolean");
  }

  /**
   * Creates or replaces a recurring schedule (`PUT /v1/schedules/{name}`): a job
   * `{name}@{fire time, unix ms}` in its topic at each time its cron names. Putting it again as
   * it is changes nothing, so a retry is safe.
   */
  async putSchedule(name: string, schedule: ScheduleInput): Promise<Schedule> {
    const answer = await this.call({ method: "PUT", path: schedulePath(name), body: schedule });
    return expectField(answer, "schedule", "object") as Schedule;
  }

  /** A schedule, with its next and last fire times (`GET /v1/schedules/{name}`). */
  async getSchedule(name: string): Promise<Schedule> {
    const answer = await this.call({ method: "GET", path: schedulePath(name) });
    return expectField(answer, "schedule", "object") as Schedule;
  }

  /**
   * Deletes a schedule (`DELETE /v1/schedules/{name}`): it makes no more fires, and those made
   * ahead and not yet due are taken back. A schedule already gone answers `schedule_not_found`.
   */
  async deleteSchedule(name: string): Promise<void> {
    const answer = await this.call({ method: "DELETE", path: schedulePath(name) });
    expectField(answer, "deleted", "boolean");
  }

  /** A page of schedules by name (`GET /v1/schedules`); pass `cursor` back while `hasMore`. */
  async listSchedules(options: ListSchedulesOptions = {}): Promise<SchedulePage> {
    const answer = await this.call({
      method: "GET",
      path: "/v1/schedules",
      query: { cursor: options.cursor, limit: options.limit },
    });
    expectField(answer, "schedules", "array");
    return answer.data as SchedulePage;
  }

  /**
   * Runs one command of the command protocol (`POST /v1/command`), or up to 1000 in order.
   * A command that fails answers `success: false` with `error: "<code>: <message>"` rather
   * than throwing; the call throws only when the request as a whole fails (for a lone command,
   * that includes `redis_unavailable`). `add` commands without `id` get one, as in `add`.
   */
  async command(command: CommandInput): Promise<CommandResult>;
  async command(commands: readonly CommandInput[]): Promise<CommandResult[]>;
  async command(
    input: CommandInput | readonly CommandInput[],
  ): Promise<CommandResult | CommandResult[]> {
    const many = Array.isArray(input);
    const list: readonly CommandInput[] = many ? input : [input as CommandInput];
    const commands = list.map((command) =>
      command?.command === "add" ? withId(command) : command,
    );
    // Commands run one after another, so each pop's wait adds up.
    const waits = list.reduce(
      (sum, command) => sum + (command?.command === "pop" ? waitMs(command.wait) : 0),
      0,
    );
    const answer = await this.call({
      method: "POST",
      path: "/v1/command",
      body: many ? commands : commands[0],
      timeoutMs: this.transport.timeoutMs + waits,
    });
    if (many !== Array.isArray(answer.data) || typeof answer.data !== "object") {
      throw invalidResponse(answer, many ? "an array of results" : "a command result");
    }
    return answer.data as CommandResult | CommandResult[];
  }

  /**
   * Whether delayq is up and reaches Redis (`GET /health`, no token sent). Answers the body for
   * 503 too (`status: "degraded"`), rather than throwing: it is the answer asked for.
   */
  async health(): Promise<Health> {
    const answer = await this.call({
      method: "GET",
      path: "/health",
      auth: false,
      answerStatuses: [503],
    });
    expectField(answer, "status", "string");
    return answer.data as Health;
  }

  private call(request: Call): Promise<Answer> {
    return send(this.transport, request);
  }

  private verb(id: string, verb: string, body: Record<string, unknown>): Call {
    return { method: "POST", path: `/v1/jobs/${segment(id, "job id")}/${verb}`, body };
  }
}

/** The path of a payment watch. */
function paymentPath(provider: ProviderName, account: string, outTradeNo: string): string {
  const parts = [
    segment(provider, "provider"),
    segment(account, "account"),
    segment(outTradeNo, "outTradeNo"),
  ];
  return `/v1/payments/${parts.join("/")}`;
}

/** The path of a schedule. */
function schedulePath(name: string): string {
  return `/v1/schedules/${segment(name, "name")}`;
}

/** The path of a refund watch. */
function refundPath(provider: ProviderName, account: string, outRefundNo: string): string {
  const parts = [
    segment(provider, "provider"),
    segment(account, "account"),
    segment(outRefundNo, "outRefundNo"),
  ];
  return `/v1/refunds/${parts.join("/")}`;
}

/**
 * Jobs to finish as the server takes them. A job as pop answered it (with its state and
 * receipt) goes as its id and receipt. Any other item goes as it is, a job read with `get` too,
 * so that the server refuses a misspelt field (`reciept`) instead of finishing the job for
 * whoever holds it.
 */
function finishItems(jobs: readonly { id: string; receipt?: string }[]) {
  return jobs.map((job) =>
    "state" in job && typeof job.receipt === "string" ? { id: job.id, receipt: job.receipt } : job,
  );
}

/**
 * The page with its `hasMore`. A server older than the field sends none: it is read from the
 * `cursor` then, the same fact (a cursor comes only with a next page).
 */
function withHasMore<T extends { cursor?: string; hasMore: boolean }>(page: T): T {
  return typeof page.hasMore === "boolean" ? page : { ...page, hasMore: page.cursor !== undefined };
}
