// Reschedule, promote and failure reasons, black-box: `npm run dev` (the worker in wrangler dev)
// and a second service instance (functions/node.ts on the same bridge and keyspace, ticking every
// second), driven over HTTP only, while this suite also fires the worker's scheduled handler every
// 2 s: several ticks and two instances at once. Jobs are moved about through both instances
// while both pop them (a pull topic) or deliver them (a push topic): each is handed out once, never
// before the due time its last move gave it, none lost.
import { afterAll, beforeAll, describe, it } from "vitest";
import { type Receiver, type Stack, sleep, startTwoInstances, type TwoInstances } from "./support";

let two: TwoInstances;
let stack: Stack;
let rx: Receiver;

beforeAll(async () => {
  two = await startTwoInstances("reschedule", 2000);
  ({ stack, rx } = two);
}, 180_000);

afterAll(() => two?.stop(), 60_000);

/** Calls the second instance's API. */
const other = (method: string, path: string, body?: unknown) => two.other(method, path, body);

/** The two instances, by turn. */
const via = (n: number) =>
  n % 2 === 0
    ? (method: string, path: string, body?: unknown) => stack.api(method, path, body)
    : other;

let seed = 7;
const random = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
  return seed / 2 ** 31;
};

// Each case has its own topics (and receiver path), and the pull and push cases mostly wait on
// due times: the cases of both groups run side by side, on the one stack.
describe.concurrent("reschedule and promote under npm run dev, two instances ticking", () => {
  it("a pull topic: every job popped once, never before its last move's due time", async ({
    expect,
  }) => {
    const topic = "bb-resched";
    const total = 40;
    const due = new Map<string, number>();
    for (let i = 0; i < total; i++) {
      const add = await via(i)("POST", "/v1/jobs", {
        topic,
        id: `r-${i}`,
        delay: 4 + random() * 10,
        ttr: 600,
      });
      expect(add.status).toBe(201);
      due.set(`r-${i}`, add.json.job.dueAt);
    }
    const popped = new Map<string, { at: number; dueAt: number }[]>();
    let moves = 0;
    let refused = 0;
    let stop = false;
    const consume = async (n: number) => {
      while (!stop) {
        const res = await via(n)("POST", `/v1/topics/${topic}/pop`, { count: 5, wait: 1 });
        const at = Date.now();
        expect(res.status).toBe(200);
        for (const job of res.json.jobs) {
          popped.set(job.id, [...(popped.get(job.id) ?? []), { at, dueAt: job.dueAt }]);
          expect((await via(n)("POST", `/v1/jobs/${job.id}/finish`, {})).status).toBe(200);
        }
      }
    };
    const consumers = [consume(0), consume(1)];
    // For 10 s, each instance moves jobs: later, earlier, past (due now), or promoted.
    const moveFor = async (n: number) => {
      const until = Date.now() + 10_000;
      while (Date.now() < until) {
        const id = `r-${Math.floor(random() * total)}`;
        if (Number(id.slice(2)) % 2 !== n) continue; // one mover per job: "its last move" is one
        const roll = random();
        const res =
          roll < 0.2
            ? await via(n)("POST", `/v1/jobs/${id}/promote`)
            : await via(n)("POST", `/v1/jobs/${id}/reschedule`, {
                runAt: Date.now() + Math.floor((roll - 0.35) * 20_000),
              });
        if (res.status === 200) {
          due.set(id, res.json.job.dueAt);
          moves++;
        } else {
          expect(res.json.error.code).toBe("invalid_state");
          refused++;
        }
        await sleep(50);
      }
    };
    await Promise.all([moveFor(0), moveFor(1)]);
    const deadline = Date.now() + 30_000;
    while (popped.size < total && Date.now() < deadline) await sleep(200);
    stop = true;
    await Promise.all(consumers);

    expect(moves).toBeGreaterThan(20);
    expect(refused).toBeGreaterThan(0);
    expect(popped.size).toBe(total);
    expect([...popped.entries()].filter(([, list]) => list.length !== 1)).toEqual([]);
    for (const [id, [pop]] of popped) {
      expect({ id, dueAt: pop?.dueAt }).toEqual({ id, dueAt: due.get(id) });
      expect(pop?.at).toBeGreaterThanOrEqual(pop?.dueAt ?? Infinity);
    }
    const stats = await other("GET", `/v1/topics/${topic}`);
    expect(stats.json.counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
  }, 120_000);

  it("a push topic: a job moved sooner is delivered once at its new time, one moved later not at its old", async ({
    expect,
  }) => {
    const topic = "bb-resched-push";
    const put = await stack.api("PUT", `/v1/topics/${topic}`, {
      push: { url: rx.url("/resched"), secret: "bb-resched-secret-0123456789" },
    });
    expect(put.status).toBe(200);
    // Due in 100 s: not yet claimed (claims look 65 s ahead).
    for (let i = 0; i < 12; i++) {
      const add = await via(i)("POST", "/v1/jobs", { topic, id: `p-${i}`, delay: 100 });
      expect(add.status).toBe(201);
    }
    const dueAt = new Map<string, number>();
    for (let i = 0; i < 12; i++) {
      const res =
        i < 4
          ? await via(i)("POST", `/v1/jobs/p-${i}/promote`)
          : i < 9
            ? await via(i)("POST", `/v1/jobs/p-${i}/reschedule`, { delay: 2 + (i % 4) })
            : await via(i)("POST", `/v1/jobs/p-${i}/reschedule`, { delay: 600 });
      expect(res.status).toBe(200);
      dueAt.set(`p-${i}`, res.json.job.dueAt);
    }
    const hits = await rx.waitFor("/resched", 9, 30_000);
    await sleep(3000); // a duplicate, were there one, would arrive by now
    const got = rx.hits("/resched").map((hit) => ({ id: JSON.parse(hit.raw).id, at: hit.at }));
    expect(hits.length).toBeGreaterThanOrEqual(9);
    expect(got.map((g) => g.id).sort()).toEqual(
      ["p-0", "p-1", "p-2", "p-3", "p-4", "p-5", "p-6", "p-7", "p-8"].sort(),
    );
    for (const { id, at } of got) expect(at).toBeGreaterThanOrEqual(dueAt.get(id) as number);
    for (const id of ["p-9", "p-10", "p-11"]) {
      expect((await other("GET", `/v1/jobs/${id}`)).json.job.state).toBe("delayed");
      await stack.api("DELETE", `/v1/jobs/${id}`);
    }
  }, 90_000);

  it("refuses a bad runAt with 400 naming the field, and a reserved job with 409", async ({
    expect,
  }) => {
    const add = await stack.api("POST", "/v1/jobs", {
      topic: "bb-resched-bad",
      id: "b-1",
      delay: 60,
    });
    expect(add.status).toBe(201);
    const cases: [unknown, RegExp][] = [
      [{ runAt: Date.now() + 400 * 86_400_000 }, /runAt: must be at most a year from now/],
      [{ runAt: Math.floor(Date.now() / 1000) }, /runAt: .*looks like seconds/],
    ];
    for (const [body, message] of cases) {
      const res = await other("POST", "/v1/jobs/b-1/reschedule", body);
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe("invalid_request");
      expect(res.json.error.message).toMatch(message);
    }
    await stack.api("POST", "/v1/jobs/b-1/promote");
    await stack.api("POST", "/v1/topics/bb-resched-bad/pop", {});
    const held = await other("POST", "/v1/jobs/b-1/reschedule", { delay: 5 });
    expect(held.status).toBe(409);
    expect(held.json.error.code).toBe("invalid_state");
  });
});

describe.concurrent("failure reasons under npm run dev", () => {
  it("release and bury keep their error, and a failed push delivery records its own", async ({
    expect,
  }) => {
    await stack.api("POST", "/v1/jobs", { topic: "bb-errors", id: "e-1", maxAttempts: 3 });
    await stack.api("POST", "/v1/topics/bb-errors/pop", {});
    const released = await other("POST", "/v1/jobs/e-1/release", { error: "bank said 51 | retry" });
    expect(released.json.job.lastError).toMatchObject({
      message: "bank said 51 | retry",
      attempt: 1,
    });
    await stack.api("POST", "/v1/topics/bb-errors/pop", {});
    const buried = await stack.api("POST", "/v1/jobs/e-1/bury", { error: "gave up" });
    expect(buried.json.job).toMatchObject({
      state: "dead",
      lastError: { message: "gave up", attempt: 2 },
    });
    const dead = await other("GET", "/v1/topics/bb-errors/jobs?state=dead");
    expect(dead.json.jobs[0].lastError.message).toBe("gave up");
    const long = await stack.api("POST", "/v1/jobs/e-1/bury", { error: "x".repeat(1025) });
    expect(long.status).toBe(400);

    rx.on("/failing", { status: 500 });
    await stack.api("PUT", "/v1/topics/bb-errors-push", {
      push: { url: rx.url("/failing"), secret: "bb-errors-secret-0123456789" },
      backoff: [600],
    });
    rx.on("/failing", { status: 500 });
    await stack.api("POST", "/v1/jobs", { topic: "bb-errors-push", id: "e-2" });
    await rx.waitFor("/failing", 1, 20_000);
    let job: any;
    for (let i = 0; i < 50; i++) {
      job = (await other("GET", "/v1/jobs/e-2")).json.job;
      if (job.lastError) break;
      await sleep(200);
    }
    expect(job.lastError).toEqual({ message: "HTTP 500", at: job.lastDelivery.at, attempt: 1 });
    await stack.api("DELETE", "/v1/jobs/e-2");
  }, 60_000);
});
