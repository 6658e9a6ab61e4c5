// Push topics and the changes to a waiting job: a rescheduled job is delivered at its new time
// only, a claimed one is refused, and failed deliveries record their error as lastError.
import { afterEach, describe, expect, it } from "vitest";
import { type Receiver, startReceiver, testPushApp } from "../support/push";

let receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});

async function setup() {
  const receiver = await startReceiver();
  receivers.push(receiver);
  const app = testPushApp();
  const put = await app.call("PUT", "/v1/topics/p", {
    body: { push: { url: `${receiver.url}/hook`, secret: "test-secret-0123456789" }, ttr: 30 },
  });
  expect(put.status).toBe(200);
  return { ...app, receiver };
}

describe("push topics: reschedule and promote", () => {
  it("delivers a rescheduled job at its new time, not at its old one", async () => {
    const app = await setup();
    await app.call("POST", "/v1/jobs", { body: { topic: "p", id: "later", delay: 40 } });
    await app.call("POST", "/v1/jobs", { body: { topic: "p", id: "sooner", delay: 300 } });
    await app.settled();
    const later = await app.call("POST", "/v1/jobs/later/reschedule", { body: { delay: 3000 } });
    expect(later.json.job.state).toBe("delayed");
    // A run claiming everything due within the next 65 s finds nothing of "later".
    await app.push();
    expect(app.receiver.received).toEqual([]);
    expect((await app.call("GET", "/v1/jobs/later")).json.job.state).toBe("delayed");
    // Made due in 0.3 s: the reschedule's own background work delivers it, no tick needed.
    const sooner = await app.call("POST", "/v1/jobs/sooner/reschedule", { body: { delay: 0.3 } });
    await app.settled();
    const [got] = await app.receiver.waitFor(1);
    expect(JSON.parse(got?.body as string).id).toBe("sooner");
    expect(got?.at).toBeGreaterThanOrEqual(sooner.json.job.dueAt);
    expect(app.receiver.received).toHaveLength(1);
  });

  it("promotes a push job and delivers it at once", async () => {
    const app = await setup();
    await app.call("POST", "/v1/jobs", { body: { topic: "p", id: "now", delay: 3600 } });
    const promoted = await app.call("POST", "/v1/jobs/now/promote");
    expect(promoted.json.job.state).toBe("ready");
    await app.settled();
    expect((await app.receiver.waitFor(1)).map((r) => JSON.parse(r.body).id)).toEqual(["now"]);
  });

  it("refuses a job claimed for delivery with invalid_state", async () => {
    const app = await setup();
    app.receiver.answer(() => "hang");
    await app.call("POST", "/v1/jobs", { body: { topic: "p", id: "claimed", delay: 20 } });
    // Due within 25 s: the add claimed it for delivery at its due time.
    const res = await app.call("POST", "/v1/jobs/claimed/reschedule", { body: { delay: 600 } });
    expect(res.status).toBe(409);
    expect(res.json.error.code).toBe("invalid_state");
    expect(res.json.error.message).toMatch(/claimed for delivery/);
    await app.call("DELETE", "/v1/jobs/claimed");
  });
});

describe("push topics: failure reasons", () => {
  it("records a failed delivery's error as lastError, kept after a later success", async () => {
    const app = await setup();
    let calls = 0;
    app.receiver.answer(() =>
      ++calls === 1 ? { status: 503, headers: { "retry-after": "1" } } : { status: 204 },
    );
    await app.call("POST", "/v1/jobs", { body: { topic: "p", id: "f" } });
    // The run that delivered it gives it back due in 1 s and delivers it again.
    await app.settled();
    const [first, second] = await app.receiver.waitFor(2);
    let job = (await app.call("GET", "/v1/jobs/f")).json.job;
    for (let i = 0; i < 50 && job.state !== "finished"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      job = (await app.call("GET", "/v1/jobs/f")).json.job;
    }
    expect(job).toMatchObject({ state: "finished", attempts: 2 });
    // The success is the last delivery, with no error; the failure stays the last error.
    expect(job.lastDelivery).toEqual({ status: 204, at: expect.any(Number) });
    expect(job.lastError).toEqual({ message: "HTTP 503", at: expect.any(Number), attempt: 1 });
    expect(job.lastError.at).toBeGreaterThanOrEqual(first?.at as number);
    expect(job.lastError.at).toBeLessThanOrEqual(second?.at as number);
  });
});
