// A delivery over a connection the receiver closed, inside workerd: its fetch keeps idle connections
// and reuses them, and fails with "Network connection lost." when the receiver closed the one it
// took. The worker sends such a delivery again at once, before it counts a failed attempt. The
// receiver (test/support/global-setup.ts, closingReceiverUrl) drops a connection's second request.
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { call } from "./support";

const vars = env as Record<string, unknown>;
const closing = String(vars.CLOSING_RECEIVER_URL);
const recorder = String(vars.RECEIVER_URL);

type Arrival = { id: string; onConnection: number; dropped: boolean };
type Job = { state: string; attempts: number; lastDelivery?: { status: number; error?: string } };

/** The job once its delivery is settled (a lastDelivery recorded), or throws after `ms`. */
async function settledJob(id: string, ms = 10_000): Promise<Job> {
  const deadline = Date.now() + ms;
  for (;;) {
    const { job } = (await call("GET", `/v1/jobs/${id}`)).json as { job: Job };
    if (job.lastDelivery) return job;
    if (Date.now() > deadline) throw new Error(`${id}: not settled in ${ms} ms (${job.state})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What reached the closing receiver for `id` (read through the recorder's own port). */
async function arrivals(id: string): Promise<Pick<Arrival, "onConnection" | "dropped">[]> {
  const got = (await (await fetch(`${recorder}/__received?id=${id}`)).json()) as Arrival[];
  return got.map(({ onConnection, dropped }) => ({ onConnection, dropped }));
}

async function pushTopic(path: string) {
  const topic = `wc-${crypto.randomUUID().slice(0, 8)}`;
  // A failed attempt waits an hour: beyond the lookahead of a cron tick that another file runs on
  // the same prefix, which would otherwise claim it and wait for its due time.
  const put = await call("PUT", `/v1/topics/${topic}`, {
    push: { url: `${closing}${path}`, secret: "workerd-secret-0123" },
    backoff: [3600],
  });
  expect(put.status).toBe(200);
  return topic;
}

describe("a delivery over a connection the receiver closed, inside workerd", () => {
  // First: its first request goes out on a fresh connection (nothing pooled to this receiver yet).
  it("a receiver that drops every request: one immediate retry, then a failed attempt", async () => {
    const topic = await pushTopic("/drop");
    const id = `${topic}-x`;
    await call("POST", "/v1/jobs", { topic, id, body: 1 });
    const job = await settledJob(id);
    expect(job).toMatchObject({ state: "delayed", attempts: 1, lastDelivery: { status: 0 } });
    expect(job.lastDelivery?.error).toBe(
      "could not reach the receiver: Network connection lost., also on an immediate retry",
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(await arrivals(id)).toEqual([
      { onConnection: 1, dropped: true },
      { onConnection: 1, dropped: true },
    ]);
  });

  it("is sent again at once on a new connection: two deliveries in a row both succeed at their first attempt", async () => {
    const topic = await pushTopic("/hook");
    for (const n of [1, 2]) {
      const id = `${topic}-${n}`;
      await call("POST", "/v1/jobs", { topic, id, body: n });
      expect(await settledJob(id)).toMatchObject({
        state: "finished",
        attempts: 1,
        lastDelivery: { status: 204 },
      });
    }
    expect(await arrivals(`${topic}-1`)).toEqual([{ onConnection: 1, dropped: false }]);
    // The second went out on the first's connection, which the receiver dropped, then on a new one.
    expect(await arrivals(`${topic}-2`)).toEqual([
      { onConnection: 2, dropped: true },
      { onConnection: 1, dropped: false },
    ]);
  });
});
