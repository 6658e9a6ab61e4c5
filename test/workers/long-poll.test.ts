// Long-polls inside workerd, woken by writes from other requests: a Worker may not resolve one
// request's promise from another ("Cannot perform I/O on behalf of a different request"), so the
// wake-up must not cross requests (issue 8.1). Requests go through SELF, as real requests do.
import { SELF } from "cloudflare:test";
import { describe, expect, it } from "vitest";

const AUTH = { authorization: "Bearer worker-admin" };

async function post(path: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await SELF.fetch(`http://delayq.test${path}`, {
    method: "POST",
    headers: AUTH,
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, json };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("long-poll woken by another request", () => {
  it("answers the job added by a second request, every time", async () => {
    for (let round = 0; round < 5; round++) {
      const topic = `lp-${crypto.randomUUID().slice(0, 8)}`;
      const waiting = post(`/v1/topics/${topic}/pop`, { wait: 5 });
      await sleep(300);
      const started = Date.now();
      const added = await post("/v1/jobs", { topic, id: `${topic}-job`, body: round });
      expect(added.status).toBe(201);
      const popped = await waiting;
      expect(popped.status).toBe(200);
      expect(popped.json.jobs.map((job: { id: string }) => job.id)).toEqual([`${topic}-job`]);
      // Woken by the add in this isolate, not by the 1 s poll of the change counter.
      expect(Date.now() - started).toBeLessThan(900);
    }
  });

  it("serves concurrent long-polls and writers: every job once, no 5xx", async () => {
    const topic = `lpc-${crypto.randomUUID().slice(0, 8)}`;
    const consumers = Array.from({ length: 4 }, async () => {
      const got: string[] = [];
      for (let i = 0; i < 3; i++) {
        const popped = await post(`/v1/topics/${topic}/pop`, { wait: 4 });
        expect(popped.status).toBe(200);
        for (const job of popped.json.jobs) {
          got.push(job.id);
          const done = await post(`/v1/jobs/${job.id}/finish`, { receipt: job.receipt });
          expect(done.status).toBe(200);
        }
      }
      return got;
    });
    const writers = Array.from({ length: 4 }, async (_, w) => {
      for (let i = 0; i < 2; i++) {
        await sleep(150 + 100 * w);
        const added = await post("/v1/jobs", { topic, id: `${topic}-${w}-${i}`, body: i });
        expect(added.status).toBe(201);
      }
    });
    const [got] = await Promise.all([Promise.all(consumers), Promise.all(writers)]);
    const ids = got.flat().sort();
    expect(ids).toEqual(
      Array.from({ length: 8 }, (_, n) => `${topic}-${Math.floor(n / 2)}-${n % 2}`).sort(),
    );
  });
});
