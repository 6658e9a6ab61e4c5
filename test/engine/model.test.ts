// Model-based test: random sequences of operations with a controlled clock, compared step by
// step with a small in-memory model of the rules (README: "The state machine", "Retries").
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { DelayQueue } from "../../src/index";
import { DelayqError, tick } from "../../src/index";
import { type TestClock, testQueue } from "../support/queue";

type Stored = "waiting" | "reserved" | "finished" | "dead" | "deleted";
type ModelJob = {
  id: string;
  topic: string;
  s: Stored;
  due: number;
  ttr: number;
  attempts: number;
  max: number;
  backoff: readonly number[];
  deadline?: number;
  receipt?: string;
  until?: number;
  diedAt?: number;
  /** Every receipt this job was ever given, to try stale ones. */
  past: string[];
};

type Model = { jobs: Map<string, ModelJob>; paused: Set<string> };
type Real = { queue: DelayQueue; clock: TestClock };

const IDS = ["j0", "j1", "j2", "j3", "j4", "j5"];
const TOPICS = ["a", "b"];

/** The outcome of an operation, comparable between model and real: a value or an error code. */
type Outcome = { ok: unknown } | { error: string };

async function outcome(work: () => Promise<unknown>): Promise<Outcome> {
  try {
    return { ok: await work() };
  } catch (error) {
    if (error instanceof DelayqError) return { error: error.code };
    throw error;
  }
}

function visibleState(job: ModelJob, now: number) {
  if (job.s === "waiting") return job.due <= now ? "ready" : "delayed";
  return job.s;
}

// ---- the rules, in plain TypeScript -------------------------------------------------------

function kill(job: ModelJob, now: number) {
  job.s = "dead";
  job.diedAt = now;
  job.receipt = undefined;
  job.until = undefined;
}

/** A failed reservation: wait (default: the backoff step) or die. */
function retry(job: ModelJob, now: number, wait?: number) {
  if (job.attempts >= job.max) return kill(job, now);
  const step = job.backoff[Math.min(job.attempts, job.backoff.length) - 1] ?? 0;
  const due = now + (wait ?? step * 1000);
  if (job.deadline !== undefined && due > job.deadline) return kill(job, now);
  job.s = "waiting";
  job.due = due;
  job.receipt = undefined;
  job.until = undefined;
}

function expire(model: Model, now: number, topic?: string) {
  const expired = [...model.jobs.values()]
    .filter((j) => j.s === "reserved" && (topic === undefined || j.topic === topic))
    .filter((j) => (j.until as number) <= now);
  for (const job of expired) retry(job, now);
}

/** Why a held-job operation fails, or undefined when it may go ahead. */
function heldError(job: ModelJob | undefined, receipt: string): string | undefined {
  if (!job) return "job_not_found";
  if (receipt !== "" && receipt !== job.receipt) return "stale_receipt";
  if (job.s !== "reserved") return "not_reserved";
  return undefined;
}

// ---- commands -----------------------------------------------------------------------------

type ReceiptChoice = "current" | "stale" | "none" | "bogus";

function pickReceipt(job: ModelJob | undefined, choice: ReceiptChoice): string {
  if (choice === "none" || !job) return "";
  if (choice === "current") return job.receipt ?? "";
  if (choice === "stale") return job.past.find((r) => r !== job.receipt) ?? "bogus.0";
  return "bogus.0";
}

/** One add as the model sees it; `now` is the operation's time. */
type AddSpec = {
  id: string;
  topic: string;
  delayMs: number;
  ttr: number;
  max: number;
  backoff: readonly number[];
  deadlineIn: number | undefined;
  replace: boolean;
};

function addInput(spec: AddSpec, now: number) {
  return {
    topic: spec.topic,
    id: spec.id,
    body: { id: spec.id },
    delay: spec.delayMs / 1000,
    ttr: spec.ttr,
    maxAttempts: spec.max,
    backoff: spec.backoff.length > 0 ? [...spec.backoff] : undefined,
    deadline: spec.deadlineIn === undefined ? undefined : now + spec.delayMs + spec.deadlineIn,
    replace: spec.replace,
  };
}

function modelAdd(model: Model, spec: AddSpec, now: number): Outcome {
  const existing = model.jobs.get(spec.id);
  const fresh = (): ModelJob => ({
    id: spec.id,
    topic: spec.topic,
    s: "waiting",
    due: now + spec.delayMs,
    ttr: spec.ttr * 1000,
    attempts: 0,
    max: spec.max,
    backoff: spec.backoff,
    deadline: spec.deadlineIn === undefined ? undefined : now + spec.delayMs + spec.deadlineIn,
    past: [],
  });
  if (existing && existing.topic !== spec.topic) return { error: "job_exists" };
  if (existing && !spec.replace) {
    return { ok: { created: false, state: visibleState(existing, now), due: existing.due } };
  }
  if (existing?.s === "reserved") return { error: "job_reserved" };
  const job = fresh();
  model.jobs.set(spec.id, job);
  return { ok: { created: true, state: visibleState(job, now), due: job.due } };
}

class AddBatch implements fc.AsyncCommand<Model, Real> {
  constructor(readonly specs: AddSpec[]) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const now = real.clock.now;
    const results = await real.queue.addBatch(this.specs.map((spec) => addInput(spec, now)));
    const got = results.map(
      (r): Outcome =>
        "error" in r
          ? { error: r.error.code }
          : { ok: { created: r.created, state: r.job.state, due: r.job.dueAt } },
    );
    const expected = this.specs.map((spec) => modelAdd(model, spec, now));
    expect(got, this.toString()).toEqual(expected);
  }
  toString = () => `addBatch(${this.specs.map(describeAdd).join(", ")})`;
}

function describeAdd(spec: AddSpec) {
  return `${spec.id}@${spec.topic} delay ${spec.delayMs}ms ttr ${spec.ttr} max ${spec.max} backoff [${spec.backoff}] deadline +${spec.deadlineIn}${spec.replace ? " replace" : ""}`;
}

class Add implements fc.AsyncCommand<Model, Real> {
  constructor(readonly spec: AddSpec) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const now = real.clock.now;
    const got = await outcome(async () => {
      const { created, job } = await real.queue.add(addInput(this.spec, now));
      return { created, state: job.state, due: job.dueAt };
    });
    expect(got, this.toString()).toEqual(modelAdd(model, this.spec, now));
  }
  toString = () => `add(${describeAdd(this.spec)})`;
}

class Pop implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly topic: string,
    readonly count: number,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const now = real.clock.now;
    const jobs = await real.queue.pop(this.topic, { count: this.count });
    if (model.paused.has(this.topic)) return void expect(jobs).toEqual([]);
    expire(model, now, this.topic);
    const ready = [...model.jobs.values()]
      .filter((j) => j.topic === this.topic && j.s === "waiting" && j.due <= now)
      .sort((x, y) => x.due - y.due || (x.id < y.id ? -1 : 1));
    // Jobs past their deadline die and give way to the next ready ones (issue 8.5).
    const expected: { id: string; attempts: number }[] = [];
    for (const job of ready) {
      if (expected.length >= this.count) break;
      if (job.deadline !== undefined && now > job.deadline) {
        kill(job, now);
        continue;
      }
      job.s = "reserved";
      job.attempts += 1;
      job.until = now + job.ttr;
      expected.push({ id: job.id, attempts: job.attempts });
    }
    expect(
      jobs.map((j) => ({ id: j.id, attempts: j.attempts })),
      this.toString(),
    ).toEqual(expected);
    for (const job of jobs) {
      expect(job.dueAt).toBeLessThanOrEqual(now); // never early
      const modelJob = model.jobs.get(job.id) as ModelJob;
      modelJob.receipt = job.receipt;
      modelJob.past.push(job.receipt as string);
      expect(job.reservedUntil).toBe(modelJob.until);
    }
  }
  toString = () => `pop(${this.topic}, ${this.count})`;
}

class Held implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly op: "finish" | "touch" | "release" | "bury",
    readonly id: string,
    readonly choice: ReceiptChoice,
    readonly delayMs?: number,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const now = real.clock.now;
    const job = model.jobs.get(this.id);
    const receipt = pickReceipt(job, this.choice);
    const options = receipt === "" ? {} : { receipt };
    const got = await outcome(async () => {
      if (this.op === "finish") return void (await real.queue.finish(this.id, options));
      const delay = this.delayMs === undefined ? {} : { delay: this.delayMs / 1000 };
      const after =
        this.op === "touch"
          ? await real.queue.touch(this.id, options)
          : this.op === "bury"
            ? await real.queue.bury(this.id, options)
            : await real.queue.release(this.id, { ...options, ...delay });
      return { state: after.state, attempts: after.attempts, due: after.dueAt };
    });
    let error = heldError(job, receipt);
    if (this.op === "finish" && error === "not_reserved" && job?.s === "finished")
      error = undefined;
    if (error || !job) {
      expect(got, this.toString()).toEqual({ error });
      return;
    }
    if (this.op === "finish") {
      job.s = "finished";
      job.until = undefined;
      expect(got, this.toString()).toEqual({ ok: undefined });
      return;
    }
    if (this.op === "touch") job.until = now + job.ttr;
    if (this.op === "bury") kill(job, now);
    if (this.op === "release") retry(job, now, this.delayMs);
    expect(got, this.toString()).toEqual({
      ok: { state: visibleState(job, now), attempts: job.attempts, due: job.due },
    });
  }
  toString = () => `${this.op}(${this.id}, receipt ${this.choice}, delay ${this.delayMs})`;
}

class Delete implements fc.AsyncCommand<Model, Real> {
  constructor(readonly id: string) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const got = await outcome(() => real.queue.delete(this.id));
    const job = model.jobs.get(this.id);
    if (!job) return void expect(got).toEqual({ error: "job_not_found" });
    job.s = "deleted";
    job.until = undefined;
    expect(got).toEqual({ ok: undefined });
  }
  toString = () => `delete(${this.id})`;
}

class Kick implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly topic: string,
    readonly count: number,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const now = real.clock.now;
    const kicked = await real.queue.kick(this.topic, { count: this.count });
    const dead = [...model.jobs.values()]
      .filter((j) => j.topic === this.topic && j.s === "dead")
      .sort((x, y) => (x.diedAt as number) - (y.diedAt as number) || (x.id < y.id ? -1 : 1))
      .slice(0, this.count);
    for (const job of dead) {
      job.s = "waiting";
      job.attempts = 0;
      job.due = now;
    }
    expect(kicked, this.toString()).toBe(dead.length);
  }
  toString = () => `kick(${this.topic}, ${this.count})`;
}

class Pause implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly topic: string,
    readonly paused: boolean,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    await real.queue.configure(this.topic, { paused: this.paused });
    if (this.paused) model.paused.add(this.topic);
    else model.paused.delete(this.topic);
  }
  toString = () => `configure(${this.topic}, paused ${this.paused})`;
}

class DeleteDead implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ids: string[]) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const deleted = await real.queue.deleteDead("a", { ids: this.ids });
    const dead = [...new Set(this.ids)]
      .map((id) => model.jobs.get(id))
      .filter((j): j is ModelJob => j?.topic === "a" && j.s === "dead");
    for (const job of dead) job.s = "deleted";
    expect(deleted, this.toString()).toBe(dead.length);
  }
  toString = () => `deleteDead(a, [${this.ids}])`;
}

class Tick implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(model: Model, real: Real) {
    await tick(real.queue);
    expire(model, real.clock.now);
  }
  toString = () => "tick()";
}

class Advance implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(_model: Model, real: Real) {
    real.clock.advance(this.ms);
  }
  toString = () => `advance(${this.ms})`;
}

/** Compares every job's state with the model; `get` and topic counts must agree. */
class Check implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(model: Model, real: Real) {
    const now = real.clock.now;
    for (const id of IDS) {
      const job = model.jobs.get(id);
      const got = await outcome(async () => {
        const j = await real.queue.get(id);
        return { state: j.state, attempts: j.attempts, due: j.dueAt };
      });
      expect(got, `get(${id})`).toEqual(
        job
          ? { ok: { state: visibleState(job, now), attempts: job.attempts, due: job.due } }
          : { error: "job_not_found" },
      );
    }
    for (const topic of TOPICS) {
      const counts = { delayed: 0, ready: 0, reserved: 0, dead: 0 };
      for (const job of model.jobs.values()) {
        const state = visibleState(job, now);
        if (job.topic === topic && state in counts) counts[state as keyof typeof counts] += 1;
      }
      expect((await real.queue.topic(topic)).counts, `counts(${topic})`).toEqual(counts);
      // Listing, two at a time through the cursors, finds every job of a state.
      for (const state of ["delayed", "ready", "reserved", "dead"] as const) {
        const listed: string[] = [];
        let cursor: string | undefined;
        do {
          const page = await real.queue.list(topic, { state, cursor, limit: 2 });
          listed.push(...page.jobs.map((j) => j.id));
          cursor = page.cursor;
        } while (cursor !== undefined);
        const expected = [...model.jobs.values()]
          .filter((job) => job.topic === topic && visibleState(job, now) === state)
          .map((job) => job.id);
        // A job replaced from one far slot to another and back has its id twice in that slot's
        // list, and may be listed twice across pages (README: decisions); otherwise, once.
        const got = state === "delayed" ? [...new Set(listed)] : listed;
        expect(got.sort(), `list(${topic}, ${state})`).toEqual(expected.sort());
      }
    }
  }
  toString = () => "check()";
}

const id = fc.constantFrom(...IDS);
const topic = fc.constantFrom(...TOPICS);
const receipt = fc.constantFrom<ReceiptChoice>("current", "current", "stale", "none", "bogus");
const addSpec = fc.record({
  id,
  topic,
  // Far delays (25 min, 1 h) go to slot lists; the advances below open their slots.
  delayMs: fc.constantFrom(0, 0, 500, 1000, 3000, 1_500_000, 1_500_000, 3_600_000),
  ttr: fc.constantFrom(1, 2, 5),
  max: fc.constantFrom(1, 2, 3, 5),
  backoff: fc.constantFrom([], [0], [1], [0.5, 2], [1, 0, 3], [1500]),
  deadlineIn: fc.option(fc.constantFrom(0, 1500, 4000), { nil: undefined }),
  replace: fc.boolean(),
});
const commands = [
  fc.array(addSpec, { minLength: 1, maxLength: 4 }).map((specs) => new AddBatch(specs)),
  addSpec.map((spec) => new Add(spec)),
  fc.tuple(topic, fc.integer({ min: 1, max: 3 })).map(([t, c]) => new Pop(t, c)),
  fc
    .tuple(fc.constantFrom("finish", "touch", "bury") as fc.Arbitrary<"finish">, id, receipt)
    .map(([op, i, r]) => new Held(op, i, r)),
  fc
    .tuple(id, receipt, fc.option(fc.constantFrom(0, 700, 2000, 1_800_000), { nil: undefined }))
    .map(([i, r, d]) => new Held("release", i, r, d)),
  id.map((i) => new Delete(i)),
  fc.tuple(topic, fc.integer({ min: 1, max: 3 })).map(([t, c]) => new Kick(t, c)),
  fc.constant(new Tick()),
  fc.tuple(topic, fc.boolean()).map(([t, p]) => new Pause(t, p)),
  fc.array(id, { minLength: 1, maxLength: 3 }).map((ids) => new DeleteDead(ids)),
  fc.constantFrom(1, 499, 500, 1000, 2500, 900_000, 1_500_000).map((ms) => new Advance(ms)),
  fc.constant(new Check()),
];

describe("model", () => {
  it("agrees with the in-memory model on random operation sequences", async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 80, size: "max" }), async (cmds) => {
        const { queue, clock } = testQueue({ retention: 86_400 });
        const model: Model = { jobs: new Map(), paused: new Set() };
        await fc.asyncModelRun(() => ({ model, real: { queue, clock } }), [...cmds, new Check()]);
      }),
      { numRuns: Number(process.env.DQ_MODEL_RUNS ?? 60) },
    );
  }, 120_000);
});
