// The client's worker loop against the real app on a real queue: what it runs, what it sends.
import { describe, expect, it } from "vitest";
import type { Job } from "../../src/client";
import { setup } from "./support";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once `check` holds, polling every 20 ms; rejects after `ms`. */
async function until(check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not so within ${ms} ms`);
    await sleep(20);
  }
}

describe("work", () => {
  it("runs every job once and finishes each in the pop that takes the next", async () => {
    const { client, sent } = setup();
    const ids = Array.from({ length: 6 }, (_, i) => `w-${i}`);
    for (const id of ids) await client.add({ topic: "work", id, body: { id } });
    const ran: string[] = [];
    const worker = client.work("work", (job) => void ran.push(job.id), { concurrency: 2 });
    await until(() => ran.length === ids.length);
    await worker.stop();
    expect([...ran].sort()).toEqual(ids);
    for (const id of ids) expect((await client.get(id)).state).toBe("finished");
    // No finish request of its own: each job is finished by a pop (or, at the stop, by one
    // finishMany of what the loops still held).
    const urls = sent.map((request) => `${request.method} ${request.url.replace(/^.*\/v1/, "")}`);
    expect(urls.filter((url) => url.includes("/finish") && url !== "POST /jobs/finish")).toEqual(
      [],
    );
    const finishing = sent.filter((request) => request.url.endsWith("/v1/topics/work/pop"));
    const finishedByPop = finishing.flatMap(
      (request) => (request.body as { finish?: { id: string }[] }).finish ?? [],
    );
    const finishedAtStop = sent
      .filter((request) => request.url.endsWith("/v1/jobs/finish"))
      .flatMap((request) => request.body?.jobs ?? []);
    // A finish may be sent twice: by a pop the stop cut short, then at the stop (it answers the
    // same twice).
    const finished = new Set([...finishedByPop, ...finishedAtStop].map((item) => item.id));
    expect([...finished].sort()).toEqual(ids);
    // A loop holding jobs pops without waiting; one holding none long-polls.
    for (const request of finishing) {
      const body = request.body as { finish: unknown[]; wait: number };
      expect(body.wait).toBe(body.finish.length > 0 ? 0 : 20);
    }
  });

  it("gives a job back when its handler throws, and tells onError", async () => {
    const { client } = setup();
    await client.add({ topic: "fails", id: "bad", maxAttempts: 2 });
    await client.add({ topic: "fails", id: "good" });
    const errors: [string, string | undefined][] = [];
    const worker = client.work(
      "fails",
      (job) => {
        if (job.id === "bad") throw new Error("no card on file");
      },
      { onError: (error, job) => errors.push([(error as Error).message, job?.id]) },
    );
    await until(async () => (await client.get("bad")).state === "dead");
    await until(async () => (await client.get("good")).state === "finished");
    await worker.stop();
    // Released each time, and (the topic has no backoff) run again at once, until its attempts
    // ran out.
    expect(errors).toEqual([
      ["no card on file", "bad"],
      ["no card on file", "bad"],
    ]);
    expect(await client.get("bad")).toMatchObject({
      state: "dead",
      attempts: 2,
      // The handler's message went with each release.
      lastError: { message: "no card on file", attempt: 2 },
    });
  });

  it("extends the lease of a job whose handler outlasts half its TTR", async () => {
    const { client, sent } = setup();
    await client.add({ topic: "slow", id: "long", ttr: 1 });
    let signal: AbortSignal | undefined;
    const worker = client.work("slow", async (_job, lease) => {
      signal = lease;
      await sleep(1300);
    });
    await until(async () => (await client.get("long")).state === "finished", 8000);
    await worker.stop();
    const touches = sent.filter((request) => request.url.endsWith("/v1/jobs/long/touch"));
    expect(touches.length).toBeGreaterThanOrEqual(2); // every 500 ms for a TTR of 1 s
    expect(signal?.aborted).toBe(false);
  });

  it("aborts the handler's signal when the lease is lost, and reports the refused finish", async () => {
    const { client } = setup();
    await client.add({ topic: "lost", id: "taken", ttr: 1 });
    const errors: string[] = [];
    let lease: AbortSignal | undefined;
    const worker = client.work(
      "lost",
      async (job: Job, signal) => {
        lease = signal;
        // Another consumer takes the job over: releasing it ends this reservation.
        await client.release(job.id, { receipt: job.receipt, delay: 60 });
        await until(() => signal.aborted, 3000);
      },
      { onError: (error) => errors.push((error as { code?: string }).code ?? String(error)) },
    );
    await until(() => lease?.aborted === true, 5000);
    await worker.stop();
    // The touch was refused (its reservation had ended), then the job's finish at the stop.
    expect(errors.length).toBeGreaterThanOrEqual(2);
    for (const code of errors) expect(code).toBe("stale_receipt");
    expect((await client.get("taken")).state).toBe("delayed");
  });

  it("stops when its signal aborts, and refuses a concurrency that is not a whole number", async () => {
    const { client } = setup();
    const stop = new AbortController();
    const worker = client.work("idle", () => {}, { signal: stop.signal });
    await sleep(50);
    stop.abort();
    await worker.done;
    expect(() => client.work("idle", () => {}, { concurrency: 0 })).toThrow(/concurrency/);
    expect(() => client.work("idle", () => {}, { count: 101 })).toThrow(/count/);
    expect(() => client.work("idle", () => {}, { wait: 21 })).toThrow(/wait/);
  });

  it("ends when the server refuses its pop, rejecting done with the refusal", async () => {
    const { client } = setup();
    await client.configureTopic("hooks", { push: { url: "https://shop.example/hook" } });
    const errors: unknown[] = [];
    const worker = client.work("hooks", () => {}, { onError: (error) => errors.push(error) });
    await expect(worker.done).rejects.toMatchObject({ code: "push_topic" });
    expect(errors).toEqual([]);
  });
});
