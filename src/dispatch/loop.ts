// The run's loop: drains work and what follows from it (claim → delivery or handler → follow-ups
// → claim) within the run's subrequest budget and time. It is the one place that knows about
// budgets and deadlines; the parts it calls return the work that follows instead of starting it.
import { DIRECT_WINDOW_MS, FLOW_SPACING_MS } from "../domain/push";
import { messageOf } from "../log";
import type { Run } from "../run/run";
import type { Work } from "../run/work";
import { type Claimed, claimDue } from "./claims";
import type { Parcel } from "./delivery";
import { type DispatchDeps, type DrainReport, emptyReport, type JobHandler } from "./deps";
import { byDue, deliverOne, stillToSend } from "./direct";
import { HAND_OFF_LEAD_MS } from "./hand-off";
import { NOTICES_PER_ROUND } from "./notice-rounds";
import { sendNotices } from "./notices";
import { publishParcels } from "./publish";
import { settleBatches } from "./settle";
import { until } from "./until";

type ClaimWork = Work & { kind: "claim" };

/**
 * How late a tick may start after its time, ms: ticks a minute apart that claim 65 s ahead
 * (CLAIM_AHEAD_MS) leave nothing unclaimed while each starts within 5 s of its time.
 */
const TICK_LATENESS_MS = 5_000;
/** Most hand-offs one run asks for (one when its budget is under 100 subrequests). */
const MAX_ASKS = 4;
/** How long a run waits after a hand-off before it asks again, ms. */
const REASK_MS = 5_000;

/**
 * A topic's claims within one run (or every topic's, for a tick): at most one claim is answered
 * at a time, and work asking for one meanwhile joins the claim that follows it (many polls ending
 * at once make one claim, not one each). Whatever was written before the ask is due by then, so
 * that claim sees it.
 */
type Lane = { claiming: boolean; next?: ClaimWork };

export class RunLoop {
  readonly report: DrainReport = emptyReport();
  private readonly lanes = new Map<string, Lane>();
  /** A round of notices under way, and how many more were asked for meanwhile (0: none). */
  private readonly noticeState = { running: false, wanted: 0 };
  /** Work under way; the loop is idle at 0. */
  private open = 0;
  private idle: Promise<void> = Promise.resolve();
  private wake: () => void = () => {};
  /** Notices set aside until the claims in flight are answered (see `noticesAfterClaims`). */
  private claimWaiters: (() => void)[] = [];
  /**
   * Hand-offs: subrequests set aside for asks (so that a run its claims spent can still ask),
   * when the last ask was made, and the scope of one asked for meanwhile, to be made once
   * REASK_MS have passed since (a timer is then set).
   */
  private readonly asks: {
    reserve: number;
    lastAt: number;
    pending?: { topic?: string; horizon: number; jobCost?: number };
  } = { reserve: 0, lastAt: Number.NEGATIVE_INFINITY };
  /** The run's settles: the answers that come within a few milliseconds go in one call. */
  private readonly settle: ReturnType<typeof settleBatches>;
  /** Claims of held-back topics (flow control) the run will make, by topic: when. */
  private readonly comeBack = new Map<string, number>();
  /** Held-back topics the run asked a fresh run for, as it could not come back itself. */
  private readonly continued = new Set<string>();
  /** Topics with `rate`: the run's sends in claim order, and when its latest ones went. */
  private readonly pacers = new Map<string, { recent: number[]; chain: Promise<void> }>();

  constructor(
    private readonly run: Run,
    private readonly deps: DispatchDeps,
  ) {
    if (deps.handOff) {
      const asks = run.budget.left() >= 100 ? MAX_ASKS : 1;
      this.asks.reserve = run.budget.takeUpTo(deps.handOff.cost * asks);
    }
    this.settle = settleBatches(deps, run);
  }

  /**
   * Takes `work`; answers the run's report once the loop is idle: this work, what followed from
   * it, and any other work the run gave it meanwhile, all done or left for another invocation.
   */
  drain(work: readonly Work[]): Promise<DrainReport> {
    this.enter();
    try {
      const claims = work.filter((item): item is ClaimWork => item.kind === "claim");
      const notices = work.find((item) => item.kind === "notices");
      const claiming = claims.map((item) => this.claim(item)).some(Boolean);
      if (notices && claiming) this.noticesAfterClaims(notices.most);
      else if (notices) this.sendNotices(notices.most);
    } finally {
      this.leave();
    }
    return this.idle.then(() => this.report);
  }

  /** Work that followed from work under way. */
  private follow(work: readonly Work[]): void {
    for (const item of work) {
      if (item.kind === "claim") this.claim(item);
      else this.sendNotices(item.most);
    }
  }

  private enter(): void {
    if (this.open === 0) {
      this.idle = new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
    this.open += 1;
  }

  private leave(): void {
    this.open -= 1;
    if (this.open === 0) this.wake();
  }

  /** Counts `task` as under way until it settles (it must not reject: each logs its failure). */
  private track(task: Promise<void>): void {
    this.enter();
    void task.finally(() => this.leave());
  }

  /**
   * Starts (or joins) a claim; answers whether one is in flight for it. A follow-up for a job due
   * at `due` is left to the next tick when that tick claims it in time for sure; else it is
   * claimed when the run waits that long (`reach`), or a fresh run is asked for (`cover`).
   */
  private claim(work: ClaimWork): boolean {
    let item = work;
    if (item.due !== undefined) {
      const { due, ...rest } = item;
      if (due >= this.nextTickBy()) return false;
      const reach = this.reach();
      if (due > reach) {
        this.cover(item.topic, due);
        return false;
      }
      item = { ...rest, horizon: Math.min(reach, Math.max(rest.horizon, due)) };
    }
    const key = item.topic ?? "";
    let lane = this.lanes.get(key);
    if (!lane) {
      lane = { claiming: false };
      this.lanes.set(key, lane);
    }
    if (lane.claiming) {
      lane.next = { ...item, horizon: Math.max(lane.next?.horizon ?? 0, item.horizon) };
      return true;
    }
    if (this.run.clock() >= this.run.until) {
      // The invocation is nearly over: what is due stays claimable by the next one.
      this.report.more = true;
      return false;
    }
    lane.claiming = true;
    this.track(this.claimAndSend(item, lane));
    return true;
  }

  private async claimAndSend(item: ClaimWork, lane: Lane): Promise<void> {
    let claimed: Claimed;
    const now = this.run.clock();
    try {
      claimed = await claimDue(this.deps, this.run.budget, {
        now,
        horizon: item.horizon,
        topic: item.topic,
        consume: item.consume,
        wave: item.wave,
      });
    } catch (error) {
      this.failed("push_failed", error, item.topic);
      return;
    } finally {
      lane.claiming = false;
      this.claimAnswered();
      const next = lane.next;
      lane.next = undefined;
      if (next) this.claim(next);
    }
    this.report.claimed += claimed.claimed;
    this.report.more ||= claimed.more;
    if (claimed.more) this.handOff(item, claimed);
    // Follow-ups keep the reach of the claim they follow (a request's 25 s, a tick's 65 s).
    const reach = item.horizon - now;
    for (const [topic, at] of claimed.held) this.claimAgain(topic, at, at + reach);
    for (const [due, parcels] of byDue(claimed.direct)) this.track(this.sendGroup(due, parcels));
    if (claimed.viaQStash.length > 0) this.track(this.publish(claimed.viaQStash));
    for (const { job, handler } of claimed.internal) this.track(this.handle(job, handler));
  }

  /** Sends the direct parcels due at `due`, each settled on its own, at their due time. */
  private async sendGroup(due: number, parcels: Parcel[]): Promise<void> {
    let send: Parcel[];
    try {
      send = await stillToSend(this.run, this.deps, due, parcels);
    } catch (error) {
      // Not looked at again (Redis failed): not sent; the leases bring the jobs back.
      this.failed("push_check_failed", error);
      return;
    }
    for (const parcel of send) this.track(this.deliver(parcel));
  }

  /**
   * A topic with flow control had jobs held back (or due later within `horizon`): the run claims
   * it again at `at`, when room may have freed (a rate's next slot, a look a second later while
   * its parallelism is full, its next job's due time), while the run lasts. One such claim per
   * topic waits at a time, the earliest asked for. Past the run's end a fresh run is asked for
   * then, through QStash when hand-offs are on (else the next tick comes back for it).
   */
  private claimAgain(topic: string, at: number, horizon: number): void {
    const waiting = this.comeBack.get(topic);
    if (waiting !== undefined && waiting <= at) return;
    if (at >= this.run.until) {
      this.continueAt(topic, at);
      return;
    }
    this.comeBack.set(topic, at);
    this.track(
      until(at, this.run.clock).then(() => {
        if (this.comeBack.get(topic) !== at) return;
        this.comeBack.delete(topic);
        this.claim({ kind: "claim", topic, horizon });
      }),
    );
  }

  /**
   * Waits for a `rate` topic's turn to send: its sends go one after another in claim order (due
   * order), each at least FLOW_SPACING_MS after the one `rate` places before it actually went. The
   * claim spaced their send times so already; this keeps a send that went late (a stalled timer)
   * from bunching with those after it.
   */
  private paced(topic: string, rate: number): Promise<void> {
    let pacer = this.pacers.get(topic);
    if (!pacer) {
      pacer = { recent: [], chain: Promise.resolve() };
      this.pacers.set(topic, pacer);
    }
    const { recent } = pacer;
    const turn = pacer.chain.then(async () => {
      const back = recent.length >= rate ? recent[recent.length - rate] : undefined;
      if (back !== undefined) await until(back + FLOW_SPACING_MS, this.run.clock);
      recent.push(this.run.clock());
      if (recent.length > rate) recent.shift();
    });
    pacer.chain = turn;
    return turn;
  }

  private continueAt(topic: string, at: number): void {
    const { handOff } = this.deps;
    if (!handOff || this.continued.has(topic)) return;
    this.continued.add(topic);
    this.track(
      handOff.continueAt(this.run, topic, at).then(
        () => {},
        (error: unknown) => this.failed("flow_continue_failed", error, topic),
      ),
    );
  }

  /**
   * A job of `topic` due at `due`, before the next tick may come, that the run cannot wait for: a
   * fresh run is asked for its wave through QStash (once per topic and wave: the hand-off
   * remembers the waves it asked for). Without QStash it waits for the tick.
   */
  private cover(topic: string | undefined, due: number): void {
    const { handOff } = this.deps;
    if (!handOff || topic === undefined) return;
    this.track(
      handOff.cover(this.run, topic, due).then(
        (asked) => {
          if (asked === "asked") this.report.covered += 1;
          else if (asked === "no-budget") this.report.more = true;
        },
        (error: unknown) => this.failed("hand_off_failed", error, topic),
      ),
    );
  }

  /**
   * Until when the run waits for jobs to fall due: a tick's until HAND_OFF_LEAD_MS before its end
   * (a cron invocation may run for minutes), any other's within its window (DIRECT_WINDOW_MS,
   * what a request's 30 s of `waitUntil` leave room for).
   */
  private reach(): number {
    const { run } = this;
    const end = run.until - HAND_OFF_LEAD_MS;
    return run.tick ? end : Math.min(end, run.clock() + DIRECT_WINDOW_MS);
  }

  /**
   * From when on a job written now is claimed in time by a tick: each tick claims what falls due
   * within CLAIM_AHEAD_MS of it, so a job due after the next tick (however late it starts) is
   * one's. A tick's run knows when the next one comes (an interval after it began, until then);
   * any other run only that one comes within an interval from now.
   */
  private nextTickBy(): number {
    const { run } = this;
    const interval = this.deps.tickIntervalMs;
    const now = run.clock();
    const from = run.tick && now < run.startedAt + interval ? run.startedAt : now;
    return from + interval + TICK_LATENESS_MS;
  }

  private async deliver(parcel: Parcel): Promise<void> {
    try {
      if (parcel.push.rate !== undefined) await this.paced(parcel.meta.topic, parcel.push.rate);
      const work = await deliverOne(this.run, this.deps, parcel, this.report, this.settle);
      // An answer frees a place of the topic's parallelism: its held-back jobs may go now.
      if (parcel.push.parallelism !== undefined) {
        work.push({
          kind: "claim",
          topic: parcel.meta.topic,
          horizon: this.run.clock() + DIRECT_WINDOW_MS,
        });
      }
      this.follow(work);
    } catch (error) {
      this.run.log({
        level: "error",
        event: "push_settle_failed",
        id: parcel.meta.id,
        message: messageOf(error),
      });
    }
  }

  private async publish(parcels: Parcel[]): Promise<void> {
    try {
      await publishParcels(this.run, this.deps, parcels, this.report);
    } catch (error) {
      // Not published (or not recorded): the leases bring the jobs back for another try.
      this.failed("qstash_publish_failed", error);
    }
  }

  /** Runs a job of delayq's own at its due time (never before), giving back what it did not spend. */
  private async handle(job: Parameters<JobHandler["run"]>[0], handler: JobHandler) {
    await until(job.meta.due, this.run.clock);
    try {
      const handled = await handler.run(job, this.run);
      this.run.budget.giveBack(handler.subrequests - handled.used);
      this.follow(handled.work);
    } catch (error) {
      this.run.log({
        level: "error",
        event: "internal_job_failed",
        id: job.meta.id,
        message: messageOf(error),
      });
    }
  }

  /**
   * Failure notices, a round at a time (a round takes at most NOTICES_PER_ROUND, within the
   * process's cap of open rounds), up to `most` in all. A notice asked for meanwhile (a death),
   * or a round that came back full (a burst of deaths), makes another round once this one is
   * done, while the run's budget and time last.
   */
  private sendNotices(most = Number.POSITIVE_INFINITY): void {
    const state = this.noticeState;
    if (state.running) {
      state.wanted = Math.max(state.wanted, most);
      return;
    }
    const now = this.run.clock();
    const take = Math.min(most, NOTICES_PER_ROUND, this.deps.noticeRounds.room(now));
    if (take <= 0 || now >= this.run.until) return;
    state.running = true;
    const close = this.deps.noticeRounds.open(take, now);
    const round = sendNotices(this.run, this.deps, take).then(
      ({ sent, full }) => {
        this.report.notices += sent;
        if (full) state.wanted = Math.max(state.wanted, most - take);
      },
      (error: unknown) => this.failed("notices_failed", error),
    );
    this.track(
      round.finally(() => {
        close();
        state.running = false;
        const wanted = state.wanted;
        state.wanted = 0;
        if (wanted > 0) this.sendNotices(wanted);
      }),
    );
  }

  /**
   * Notices beside claims (a tick's): a part of the budget (up to a round's worth, at most half of
   * what is left) is set aside before the claims and given to the first round once they are
   * answered, so that neither a backlog of deliveries nor a mass of notices starves the other,
   * and a failureUrl that hangs holds up no claim.
   */
  private noticesAfterClaims(most = Number.POSITIVE_INFINITY): void {
    const { budget } = this.run;
    const round = Math.min(most, NOTICES_PER_ROUND, this.deps.noticeRounds.room(this.run.clock()));
    if (round <= 0) return;
    const reserved = budget.takeUpTo(Math.min(round + 2, Math.ceil(budget.left() / 2)));
    const claimed = new Promise<void>((resolve) => this.claimWaiters.push(resolve));
    this.track(
      claimed.then(() => {
        budget.giveBack(reserved);
        this.sendNotices(most);
      }),
    );
  }

  private claimAnswered(): void {
    const waiters = this.claimWaiters;
    this.claimWaiters = [];
    for (const resolve of waiters) resolve();
  }

  /**
   * The budget stopped a claim with jobs left: fresh invocations are asked for (through QStash)
   * when the service can (else the next tick takes what is left). A run asks again when a later
   * claim of its own is stopped (its polls write polls due soon, after the runs it asked for
   * claimed): at most MAX_ASKS times, REASK_MS apart (what is stopped meanwhile joins the next
   * ask). The ledger of the runs asked for keeps asks from asking twice for the same jobs.
   */
  private handOff(item: ClaimWork, claimed: Claimed): void {
    const { handOff } = this.deps;
    if (!handOff || this.asks.reserve < handOff.cost) return;
    // What a job of this burst costs, as its claims found it (jobs due together share a look).
    const jobCost = claimed.claimed > 0 ? claimed.cost / claimed.claimed : undefined;
    const pending = this.asks.pending;
    const scope = {
      topic: pending && pending.topic !== item.topic ? undefined : item.topic,
      horizon: Math.max(item.horizon, pending?.horizon ?? 0),
      jobCost: jobCost ?? pending?.jobCost,
    };
    const wait = this.asks.lastAt + REASK_MS - this.run.clock();
    if (wait <= 0) {
      this.asks.pending = undefined;
      this.ask(scope);
      return;
    }
    const timerSet = pending !== undefined;
    this.asks.pending = scope;
    if (timerSet) return;
    this.track(
      until(this.asks.lastAt + REASK_MS, this.run.clock).then(() => {
        const again = this.asks.pending;
        this.asks.pending = undefined;
        if (again && this.run.clock() < this.run.until) this.ask(again);
      }),
    );
  }

  private ask(scope: { topic?: string; horizon: number; jobCost?: number }): void {
    const { handOff } = this.deps;
    if (!handOff || this.asks.reserve < handOff.cost) return;
    this.asks.reserve -= handOff.cost;
    this.asks.lastAt = this.run.clock();
    this.run.budget.giveBack(handOff.cost);
    const asked = handOff.ask(this.run, scope).then(
      (runs) => {
        this.report.handedOff += runs;
      },
      (error: unknown) => this.failed("hand_off_failed", error, scope.topic),
    );
    this.track(asked);
  }

  private failed(event: string, error: unknown, topic?: string): void {
    this.run.log({
      level: "error",
      event,
      ...this.run.label,
      ...(topic === undefined ? {} : { topic }),
      message: messageOf(error),
    });
  }
}
