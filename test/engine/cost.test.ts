// The cost budgets, as deterministic counts: Redis commands (INFO commandstats, inside Lua too)
// and REST requests (counted at the bridge).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CountedStack, startCountedStack } from "../../dev/counted-stack";
import { DelayQueue, tick } from "../../src/index";
import { partitions } from "../../src/redis/partitions";
import { createScriptRunner } from "../../src/redis/runner";
import { createRun } from "../../src/run/run";
import { createScheduler, drainStep } from "../../src/scheduler";
import { createSchedules } from "../../src/schedules/schedules";
import { schedulesStep } from "../../src/schedules/step";
import { testClock } from "../support/queue";

let stack: CountedStack;
beforeAll(async () => {
  stack = await startCountedStack();
});
afterAll(async () => {
  await stack?.stop();
});

function queueOn(prefix: string) {
  const clock = testClock();
  const queue = new DelayQueue({ redis: stack.client(), prefix, clock: () => clock.now });
  return { queue, clock };
}

/** Commands and requests spent by `work`. */
async function cost(work: () => Promise<unknown>) {
  const commandsBefore = await stack.commands();
  const requestsBefore = stack.bridge.stats().requests.total;
  await work();
  return {
    commands: (await stack.commands()) - commandsBefore,
    requests: stack.bridge.stats().requests.total - requestsBefore,
  };
}

describe("one job's life", () => {
  it("costs at most 5.2 Redis commands: added by 100, popped by 100, finished one by one", async () => {
    const { queue, clock } = queueOn("life");
    await stack.loadScripts();
    const n = 1000;
    const spent = await cost(async () => {
      for (let b = 0; b < n / 100; b++) {
        await queue.addBatch(
          Array.from({ length: 100 }, (_, i) => ({
            topic: "orders",
            id: `o${b * 100 + i}`,
            body: { order: b * 100 + i, note: "x".repeat(60) },
            delay: 1,
          })),
        );
      }
      clock.advance(1000);
      for (let p = 0; p < n / 100; p++) {
        const jobs = await queue.pop("orders", { count: 100 });
        expect(jobs).toHaveLength(100);
        for (const job of jobs) await queue.finish(job.id, { receipt: job.receipt });
      }
    });
    const perJob = spent.commands / n;
    expect(perJob).toBeLessThanOrEqual(5.2);
    // Floor: SET NX (add), EVALSHA + GET + ZREM + SET (finish) = 5. The pop writes no record (the
    // lease entry is the reservation) and reads them in the MGET of the ready list's first
    // entries.
    expect(perJob).toBeGreaterThanOrEqual(5);
    // One REST request per operation: 10 batches + 10 pops + 1000 finishes.
    expect(spent.requests).toBe(10 + 10 + n);
  });

  it("costs at most 12 Redis commands added, popped and finished one at a time (issue 12)", async () => {
    const { queue } = queueOn("single");
    await stack.loadScripts();
    // The topic exists already (its first add registers it); leases overlap as in steady use.
    await queue.add({ topic: "one", id: "warm" });
    await queue.pop("one");
    const n = 200;
    const spent = await cost(async () => {
      for (let i = 0; i < n; i++) {
        await queue.add({ topic: "one", id: `s${i}`, body: { i } });
        const [job] = await queue.pop("one");
        await queue.finish(job?.id as string, { receipt: job?.receipt });
      }
    });
    // add: EVALSHA, SET NX, MGET (the topic's keys), ZADD (ready) = 4 (nobody long-polls the
    // topic: no change-counter bump); pop: EVALSHA, ZPOPMIN, MGET (the topic's keys and the
    // record), ZADD (lease) = 4; finish: EVALSHA, GET, ZREM, SET = 4.
    expect(spent.commands / n).toBe(12);
    expect(spent.requests).toBe(3 * n);
  });
  it("costs one TIME more per add call and per pop call on Redis's clock, none per finish", async () => {
    // No clock option: every add and pop reads Redis's clock once (TIME, a command billed);
    // finish only stamps endedAt, with the caller's clock, and reads none.
    const queue = new DelayQueue({ redis: stack.client(), prefix: "redis-clock" });
    await stack.loadScripts();
    await queue.add({ topic: "one", id: "warm" });
    await queue.pop("one");
    const n = 200;
    const single = await cost(async () => {
      for (let i = 0; i < n; i++) {
        await queue.add({ topic: "one", id: `s${i}`, body: { i } });
        const [job] = await queue.pop("one");
        await queue.finish(job?.id as string, { receipt: job?.receipt });
      }
    });
    expect(single.commands / n).toBe(14);
    const batched = await cost(async () => {
      for (let b = 0; b < 5; b++) {
        const jobs = Array.from({ length: 100 }, (_, i) => ({ topic: "b", id: `b${b}.${i}` }));
        await queue.addBatch(jobs);
        const popped = await queue.pop("b", { count: 100 });
        expect(popped).toHaveLength(100);
        for (const job of popped) await queue.finish(job.id, { receipt: job.receipt });
      }
    });
    // 5.2 on a clock of the caller's (above), 0.02 more: a TIME per 100 added and per 100 popped.
    expect(batched.commands / 500).toBeLessThanOrEqual(5.22);
  });

  it("costs 11 commands and 2 requests a job when each pop finishes the last job (finishAndPop)", async () => {
    const { queue } = queueOn("ack-next");
    await stack.loadScripts();
    await queue.add({ topic: "one", id: "warm" });
    let held = await queue.pop("one");
    const n = 200;
    const spent = await cost(async () => {
      for (let i = 0; i < n; i++) {
        await queue.add({ topic: "one", id: `s${i}`, body: { i } });
        const next = await queue.finishAndPop("one", held);
        expect(next.finished).toEqual([{ finished: true }]);
        held = next.jobs;
      }
    });
    // add = 4 as above; finishAndPop: EVALSHA, GET, ZREM, SET (the finish), ZPOPMIN, MGET, ZADD
    // (the pop) = 7: one EVALSHA a job less than a pop and a finish of their own.
    expect(spent.commands / n).toBe(11);
    expect(spent.requests).toBe(2 * n);
  });

  it("costs 3 commands a job more, and one request, finished by the pop's batch (finishMany)", async () => {
    const { queue, clock } = queueOn("batch-finish");
    await stack.loadScripts();
    await queue.addBatch(Array.from({ length: 100 }, (_, i) => ({ topic: "t", id: `f${i}` })));
    clock.advance(1);
    const jobs = await queue.pop("t", { count: 100 });
    expect(jobs).toHaveLength(100);
    const spent = await cost(async () => {
      const results = await queue.finishMany(jobs);
      expect(results.filter((result) => "finished" in result)).toHaveLength(100);
    });
    // EVALSHA, then GET, ZREM, SET per job: the same 3 a single finish spends beside its EVALSHA.
    expect(spent.commands).toBe(1 + 3 * 100);
    expect(spent.requests).toBe(1);
  });
});

describe("the long-poll signal", () => {
  it("an add bumps the topic's change counter only while a caller may be long-polling it", async () => {
    const { queue } = queueOn("signal");
    await stack.loadScripts();
    await queue.add({ topic: "t", id: "first" });
    await queue.pop("t");
    // Nobody waits: EVALSHA, SET NX, MGET, ZADD.
    expect(await cost(() => queue.add({ topic: "t", id: "quiet" }))).toEqual({
      commands: 4,
      requests: 1,
    });
    await queue.pop("t");
    // A pop that will wait registers (one SET), and a second one soon after does not.
    expect((await cost(() => queue.pop("t", { wait: 0.2 }))).requests).toBeGreaterThanOrEqual(1);
    expect(await cost(() => queue.pop("t", { wait: 0.001 }))).toEqual({ commands: 3, requests: 1 });
    // Now an add bumps the counter (INCR) so that the waiters of other processes see it.
    expect(await cost(() => queue.add({ topic: "t", id: "heard" }))).toEqual({
      commands: 5,
      requests: 1,
    });
  });
});

describe("the herd", () => {
  it.each([
    ["pop", (queue: DelayQueue) => queue.pop("t", { wait: 2 })],
    // The worker's call when it holds no job: nothing to finish, so the same shortcut.
    [
      "finishAndPop with nothing to finish",
      async (queue: DelayQueue) => (await queue.finishAndPop("t", [], { wait: 2 })).jobs,
    ],
  ] as const)(
    "a consumer back for more (%s) reads the change counter instead of a pop, when the last pop here found nothing else ready",
    async (name, popAgain) => {
      // Real time (long-polls); the poll interval is out of reach.
      const queue = new DelayQueue({
        redis: stack.client(),
        prefix: `herd-${name.length}`,
        pollIntervalMs: 60_000,
      });
      await stack.loadScripts();
      await queue.addBatch([
        { topic: "t", id: "a", delay: 0.4 },
        { topic: "t", id: "b", delay: 1 },
      ]);
      // Two consumers of one process long-poll; one takes "a" at its due time.
      const waits = [queue.pop("t", { wait: 2 }), queue.pop("t", { wait: 2 })];
      expect((await Promise.race(waits)).map((job) => job.id)).toEqual(["a"]);
      const spent = await cost(async () => {
        // Its caller is back at once, before "b" is due.
        const again = popAgain(queue);
        const got = (await Promise.all([...waits, again])).flat();
        expect(got.map((job) => job.id).sort()).toEqual(["a", "b"]);
      });
      // GET (the counter, unchanged: nothing was added since that pop found the ready list empty),
      // then one pop at b's due time: EVALSHA, TIME (the queue is on Redis's clock), ZPOPMIN
      // (empty), MGET, ZRANGE, ZREM, SET (upkeep), GET, ZADD. Before, the caller's pop found
      // nothing: EVALSHA, TIME, ZPOPMIN, MGET.
      expect(spent.commands).toBe(10);
    },
  );
});

describe("the herd's wake-ups", () => {
  it("a pop that leaves fresh due jobs in the ready list says more is ready without a ZCARD", async () => {
    const queue = new DelayQueue({
      redis: stack.client(),
      prefix: "wakeups",
      pollIntervalMs: 60_000,
    });
    await stack.loadScripts();
    const dueAt = Date.now() + 400;
    await queue.addBatch([
      { topic: "t", id: "a", runAt: dueAt },
      { topic: "t", id: "b", runAt: dueAt },
    ]);
    const zcards = async () => (await stack.commandStats()).zcard ?? 0;
    const before = await zcards();
    // Two consumers of one process: the one that wakes at the due time pops with the other
    // waiting, takes "a", and leaves "b" in the ready list; the other wakes for it.
    const got = await Promise.all([queue.pop("t", { wait: 2 }), queue.pop("t", { wait: 2 })]);
    expect(
      got
        .flat()
        .map((job) => job.id)
        .sort(),
    ).toEqual(["a", "b"]);
    expect(await zcards()).toBe(before);
  });
});

describe("pop's upkeep", () => {
  it("costs 3 commands beside the pop when one job fell due: the bucket's first entries, its removal, the timing", async () => {
    const { queue, clock } = queueOn("upkeep");
    await stack.loadScripts();
    await queue.addBatch([
      { topic: "t", id: "first", delay: 1 },
      { topic: "t", id: "second", delay: 2 },
      { topic: "t", id: "later", delay: 60 },
    ]);
    clock.advance(1000);
    // The first upkeep reads the first lease and the first slot (their bounds are not known
    // yet) and the first lease is recorded as the topic's lease bound.
    expect((await queue.pop("t")).map((job) => job.id)).toEqual(["first"]);
    clock.advance(1000);
    const spent = await cost(async () => {
      expect((await queue.pop("t")).map((job) => job.id)).toEqual(["second"]);
    });
    // EVALSHA, ZPOPMIN (the ready list, empty), MGET (the topic's keys); upkeep: ZRANGE (the
    // delay bucket's first entries), ZREM, SET (timing: no lease ends and no slot opens yet, so
    // neither is read); then GET, ZADD (lease): the job is reserved from what upkeep found, not
    // written to the ready list and popped from it.
    expect(spent).toEqual({ commands: 8, requests: 1 });
  });
});

describe("every operation is one REST request", () => {
  it("sends exactly one request per call", async () => {
    const { queue } = queueOn("requests");
    const one = async (work: () => Promise<unknown>) => {
      expect((await cost(work)).requests).toBe(1);
    };
    await one(() => queue.add({ topic: "t", id: "a" }));
    await one(() =>
      queue.addBatch([
        { topic: "t", id: "b" },
        { topic: "u", id: "c" },
      ]),
    );
    await one(() => queue.get("a"));
    await one(() => queue.pop("t", { count: 2 }));
    await one(() => queue.touch("a"));
    await one(() => queue.release("a"));
    await one(() => queue.pop("t"));
    await one(() => queue.bury("a"));
    await one(() => queue.list("t", { state: "dead" }));
    await one(() => queue.kick("t", { ids: ["a"] }));
    await one(() => queue.finish("b"));
    await one(() => queue.delete("a"));
    await one(() => queue.deleteDead("t"));
    await one(() => queue.configure("t", { ttr: 5 }));
    await one(() => queue.topic("t"));
    await one(() => queue.topics());
    await one(() => queue.tickSlice());
  });
});

describe("idle cost", () => {
  it("with 16 partitions: 22 commands and 5 requests a job's life one at a time, an idle tick 32 commands", async () => {
    // The layout of a Redis Cluster (docs/cluster.md), its 16 keyspaces on this one server: an
    // add claims its id first (idClaim: FCALL/EVALSHA, TIME, GET, EXISTS, SET), a finish by id
    // looks it up (idWhere: EVALSHA, MGET) and, its index entry elsewhere, lists it (RPUSH).
    const queue = new DelayQueue({ redis: stack.client(), prefix: "parts", partitions: 16 });
    await stack.loadScripts();
    await queue.add({ topic: "one", id: "warm" });
    await queue.pop("one");
    await tick(queue);
    const n = 32;
    // Ids whose index entries live in another partition than the topic's, as 15 in 16 do.
    const layout = partitions("parts", 16);
    const ids: string[] = [];
    for (let i = 0; ids.length < n; i++) {
      if (layout.ofId(`p${i}`) !== layout.ofTopic("one")) ids.push(`p${i}`);
    }
    const life = await cost(async () => {
      for (const id of ids) {
        await queue.add({ topic: "one", id, body: 1 });
        const [job] = await queue.pop("one");
        await queue.finish(job?.id as string, { receipt: job?.receipt });
      }
    });
    // The first job to end puts the ended list's schedule marker up (ZADD): one command, once.
    expect(life).toEqual({ commands: 22 * n + 1, requests: 5 * n });
    // The next tick gives the ended jobs' index entries their records' expiry (the marker said
    // so), then idles: each partition's tick, the calls to all 16 at once in one request.
    await tick(queue);
    expect(await cost(() => tick(queue))).toEqual({ commands: 32, requests: 1 });
  });

  it("an idle tick costs 2 commands whatever the number of topics", async () => {
    const { queue, clock } = queueOn("idle");
    await stack.loadScripts();
    await queue.addBatch(
      Array.from({ length: 300 }, (_, i) => ({ topic: `topic-${i}`, id: `j${i}`, delay: 3600 })),
    );
    await tick(queue);
    clock.advance(1000);
    expect(await cost(() => tick(queue))).toEqual({ commands: 2, requests: 1 });
  });

  it("a pop on an empty topic costs 3 commands and one request (issue 12)", async () => {
    const { queue } = queueOn("idle-pop");
    await stack.loadScripts();
    await queue.add({ topic: "drained", id: "x", delay: 60 });
    expect(await cost(() => queue.pop("nothing-here"))).toEqual({ commands: 3, requests: 1 });
    // A topic with a job due later answers when to look again from its timing: still 3.
    expect(await cost(() => queue.pop("drained"))).toEqual({ commands: 3, requests: 1 });
  });

  it("an idle tick costs 2 commands with push topics and payment watches waiting far ahead", async () => {
    const { queue, clock } = queueOn("idle-push");
    await stack.loadScripts();
    await queue.configure("hooks", { push: { url: "https://shop.example/hook" } });
    await queue.add({ topic: "hooks", id: "later", delay: 3600 });
    await tick(queue);
    clock.advance(1000);
    expect(await cost(() => tick(queue))).toEqual({ commands: 2, requests: 1 });
  });
});

describe("a topic page for a topic-limited caller", () => {
  it("reads the stats of its own topics only: one command for the names, none per topic of others", async () => {
    const { queue } = queueOn("scopedpage");
    await stack.loadScripts();
    await queue.addBatch(
      Array.from({ length: 90 }, (_, i) => ({ topic: `other-${i}`, id: `x${i}` })),
    );
    await queue.add({ topic: "shop.a", id: "mine" });
    const scoped = queue.withScope(["shop.*"]);
    const own = await cost(() => scoped.topics({ limit: 100 }));
    const all = await cost(() => queue.topics({ limit: 100 }));
    const page = await scoped.topics({ limit: 100 });
    expect(page.topics.map((t) => t.topic)).toEqual(["shop.a"]);
    expect(own.requests).toBe(1);
    // The EVALSHA, the names' ZRANGE and one topic's stats, against 91 topics' stats.
    expect(own.commands).toBeLessThan(15);
    expect(all.commands).toBeGreaterThan(90 * 5);
  });
});

describe("changing a waiting job", () => {
  it("costs 7 commands to reschedule a delayed job and 7 to promote one, one request each", async () => {
    const { queue } = queueOn("moves");
    await stack.loadScripts();
    await queue.add({ topic: "t", id: "warm", delay: 30 });
    const n = 50;
    await queue.addBatch(
      Array.from({ length: n }, (_, i) => ({ topic: "t", id: `m${i}`, delay: 60 })),
    );
    // Later, within the delayed zset: EVALSHA, GET, ZREM (delayed), ZSCORE (push topic?), ZADD
    // (delayed), MGET (the topic's keys: is it due before the topic's next?), SET = 7.
    const later = await cost(async () => {
      for (let i = 0; i < n; i++) await queue.reschedule(`m${i}`, { delay: 70 });
    });
    expect(later).toEqual({ commands: 7 * n, requests: n });
    // Promote: EVALSHA, GET, ZREM (delayed), ZSCORE (push topic?), ZADD (ready), MGET (the
    // topic's keys: does anyone long-poll it?), SET = 7; INCR (its change counter) while a
    // caller long-polls it.
    const promoted = await cost(async () => {
      for (let i = 0; i < n; i++) await queue.promote(`m${i}`);
    });
    expect(promoted).toEqual({ commands: 7 * n, requests: n });
    expect((await queue.pop("t", { count: 100 })).length).toBe(n);
  });

  it("costs a release or bury no command more with an error", async () => {
    const { queue } = queueOn("errors");
    await stack.loadScripts();
    await queue.addBatch(Array.from({ length: 4 }, (_, i) => ({ topic: "t", id: `e${i}` })));
    await queue.pop("t", { count: 4 });
    const plain = await cost(() => queue.release("e0", { delay: 60 }));
    const withError = await cost(() => queue.release("e1", { delay: 60, error: "why" }));
    expect(withError).toEqual(plain);
    const buried = await cost(() => queue.bury("e2"));
    expect(await cost(() => queue.bury("e3", { error: "why" }))).toEqual(buried);
  });
});

describe("recurring schedules", () => {
  function withSchedules(prefix: string) {
    const { queue, clock } = queueOn(prefix);
    const schedules = createSchedules({
      scripts: createScriptRunner(stack.client(), prefix, 3_600_000),
      defaults: { ttrMs: 60_000, maxAttempts: 10 },
    });
    const scheduler = createScheduler({
      steps: [drainStep(queue), schedulesStep(schedules)],
    });
    const ticked = () =>
      scheduler.tick(
        createRun({
          clock: () => clock.now,
          startedAt: clock.now,
          subrequests: 1000,
          lifetimeMs: 60_000,
          log: () => {},
        }),
      );
    return { queue, clock, schedules, ticked };
  }

  it("an idle tick costs 2 commands with schedules whose fires are far, or paused", async () => {
    const { clock, schedules, ticked } = withSchedules("idle-sched");
    await stack.loadScripts();
    // 1_800_000_000_000 is 08:00 UTC: a daily 09:00 schedule's next fire is an hour ahead.
    for (let i = 0; i < 20; i++) {
      await schedules.put(
        `daily-${i}`,
        { cron: "0 9 * * *", topic: `t${i}` },
        undefined,
        clock.now,
      );
    }
    await schedules.put(
      "off",
      { cron: "* * * * * *", topic: "off", paused: true },
      undefined,
      clock.now,
    );
    await ticked();
    for (let m = 1; m <= 5; m++) {
      clock.advance(60_000);
      expect(await cost(ticked)).toEqual({ commands: 2, requests: 1 });
    }
  });

  it("a tick making a schedule's fire: 2 calls and 17 commands more than the drain's", async () => {
    const { queue, clock, schedules, ticked } = withSchedules("fire-sched");
    await stack.loadScripts();
    await schedules.put("minutely", { cron: "* * * * *", topic: "m" }, undefined, clock.now);
    await ticked();
    clock.advance(60_000);
    // The drain (the topic's fire made at the put falls due now) as the tick would run it.
    await queue.tickSlice(clock.now);
    const spent = await cost(() => schedules.makeDue(clock.now, 50));
    // schedulesDue: EVALSHA, ZRANGE, MGET. scheduleFire: EVALSHA, GET (the record); the fire's
    // addJob: SET NX, MGET (the topic's keys), ZADD (delayed), SET (timing) + ZADD LT (schedule:
    // the topic's next, lowered), ZADD NX (topics), INCR (seq); SET (record), ZADD (due); ZRANGE
    // + ZADD re-arming the marker.
    expect(spent).toEqual({ commands: 17, requests: 2 });
  });

  it("put, get, list and delete cost one request each", async () => {
    const { clock, schedules } = withSchedules("ops-sched");
    await stack.loadScripts();
    const put = await cost(() =>
      schedules.put("hourly", { cron: "0 * * * *", topic: "h" }, undefined, clock.now),
    );
    const again = await cost(() =>
      schedules.put("hourly", { cron: "0 * * * *", topic: "h" }, undefined, clock.now),
    );
    const get = await cost(() => schedules.get("hourly", undefined, clock.now));
    const list = await cost(() => schedules.list({}, undefined, clock.now));
    const del = await cost(() => schedules.delete("hourly", undefined, clock.now));
    // put (no fire within 80 s): EVALSHA, GET, SET, ZADD (due), ZADD LT (marker), ZADD (names).
    expect(put).toEqual({ commands: 6, requests: 1 });
    // put unchanged: EVALSHA, GET.
    expect(again).toEqual({ commands: 2, requests: 1 });
    expect(get).toEqual({ commands: 2, requests: 1 });
    // list: EVALSHA, ZRANGE, MGET.
    expect(list).toEqual({ commands: 3, requests: 1 });
    // delete (no fire ahead): EVALSHA, GET, DEL, ZREM, ZREM.
    expect(del).toEqual({ commands: 5, requests: 1 });
  });
});
