// POST /v1/jobs/{id}/reschedule and /promote, release's and bury's `error`, and the same through
// the command protocol: through the real app.
import { describe, expect, it } from "vitest";
import { testApp } from "../support/app";

describe("POST /v1/jobs/{id}/reschedule and /promote", () => {
  it("reschedules a delayed job and promotes it, answering the job", async () => {
    const { call, clock } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "t", id: "j", delay: 60, body: { n: 1 } } });
    const later = await call("POST", "/v1/jobs/j/reschedule", { body: { delay: 600 } });
    expect(later.status).toBe(200);
    expect(later.json.job).toMatchObject({ id: "j", state: "delayed", dueAt: clock.now + 600_000 });
    const at = "2027-01-15T09:00:00Z";
    const iso = await call("POST", "/v1/jobs/j/reschedule", { body: { runAt: at } });
    expect(iso.json.job.dueAt).toBe(Date.parse(at));
    const promoted = await call("POST", "/v1/jobs/j/promote");
    expect(promoted.status).toBe(200);
    expect(promoted.json.job).toMatchObject({ state: "ready", dueAt: clock.now, body: { n: 1 } });
    const again = await call("POST", "/v1/jobs/j/promote");
    expect(again.status).toBe(409);
    expect(again.json.error).toMatchObject({ code: "invalid_state" });
    expect(again.json.error.message).toMatch(/j is ready: only a delayed job can be promoted/);
  });

  it("answers 409 invalid_state for a reserved job and 404 for none", async () => {
    const { call } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "t", id: "j" } });
    await call("POST", "/v1/topics/t/pop", { body: {} });
    const held = await call("POST", "/v1/jobs/j/reschedule", { body: { delay: 5 } });
    expect(held.status).toBe(409);
    expect(held.json.error.code).toBe("invalid_state");
    expect((await call("POST", "/v1/jobs/nope/promote")).status).toBe(404);
  });

  it("refuses bad input with 400 invalid_request naming the field", async () => {
    const { call, clock } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "t", id: "j", delay: 60 } });
    const cases: [unknown, RegExp][] = [
      [{ runAt: clock.now + 366 * 86_400_000 }, /runAt: must be at most a year from now/],
      [
        { runAt: Math.floor(clock.now / 1000) },
        /runAt: must be unix milliseconds, and \d+ looks like seconds/,
      ],
      [{ runAt: "tomorrow" }, /runAt: must be unix milliseconds .* or an ISO-8601/],
      [{ delay: 400 * 86_400 }, /delay: /],
      [{ delay: 1, runAt: clock.now }, /runAt: give either delay or runAt, not both/],
      [{}, /delay: give the new due time/],
      [{ delay: 1, when: 2 }, /unknown field "when"/],
    ];
    for (const [body, message] of cases) {
      const res = await call("POST", "/v1/jobs/j/reschedule", { body });
      expect({ body, status: res.status, code: res.json.error.code }).toEqual({
        body,
        status: 400,
        code: "invalid_request",
      });
      expect(res.json.error.message).toMatch(message);
    }
    expect((await call("POST", "/v1/jobs/j/reschedule")).status).toBe(400);
    expect((await call("GET", "/v1/jobs/j")).json.job.dueAt).toBe(clock.now + 60_000);
  });

  it("answers a limited token's job of another topic as missing", async () => {
    const { call } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "other", id: "o", delay: 60 } });
    const res = await call("POST", "/v1/jobs/o/promote", { token: "shop-a-token" });
    expect(res.status).toBe(404);
    expect((await call("GET", "/v1/jobs/o")).json.job.state).toBe("delayed");
  });
});

describe("release and bury with error", () => {
  it("keep the error as the job's lastError, and refuse one over 1 KiB", async () => {
    const { call, clock } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "t", id: "j", maxAttempts: 3 } });
    await call("POST", "/v1/topics/t/pop", { body: {} });
    const released = await call("POST", "/v1/jobs/j/release", {
      body: { error: "upstream 502 from the bank" },
    });
    expect(released.json.job.lastError).toEqual({
      message: "upstream 502 from the bank",
      at: clock.now,
      attempt: 1,
    });
    await call("POST", "/v1/topics/t/pop", { body: {} });
    const long = await call("POST", "/v1/jobs/j/bury", { body: { error: "x".repeat(1025) } });
    expect(long.status).toBe(400);
    expect(long.json.error.message).toMatch(/error: must be at most 1024 bytes/);
    clock.advance(1000);
    const buried = await call("POST", "/v1/jobs/j/bury", { body: { error: "gave up" } });
    expect(buried.json.job).toMatchObject({
      state: "dead",
      lastError: { message: "gave up", at: clock.now, attempt: 2 },
    });
    const dead = await call("GET", "/v1/topics/t/jobs?state=dead");
    expect(dead.json.jobs[0].lastError.message).toBe("gave up");
  });
});

describe("the command protocol", () => {
  it("runs reschedule and promote, and release and bury with error", async () => {
    const { call, clock } = testApp();
    const command = async (body: unknown) => (await call("POST", "/v1/command", { body })).json;
    await command({ command: "add", topic: "t", id: "x", delay: 60 });
    expect(await command({ command: "reschedule", id: "x", delay: 120 })).toMatchObject({
      success: true,
      error: "",
      id: "x",
      value: { state: "delayed", dueAt: clock.now + 120_000 },
    });
    expect(await command({ command: "reschedule", id: "x" })).toMatchObject({
      success: false,
      error: expect.stringMatching(/^invalid_request: .*delay: give the new due time/),
    });
    expect(await command({ command: "promote", id: "x" })).toMatchObject({
      success: true,
      value: { state: "ready" },
    });
    expect(await command({ command: "promote", id: "x" })).toMatchObject({
      success: false,
      error: expect.stringMatching(/^invalid_state: Job x is ready/),
    });
    const pop = await command({ command: "pop", topic: "t" });
    expect(
      await command({ command: "release", id: "x", receipt: pop.receipt, error: "e1", delay: 0 }),
    ).toMatchObject({ success: true, value: { lastError: { message: "e1", attempt: 1 } } });
    await command({ command: "pop", topic: "t" });
    expect(await command({ command: "bury", id: "x", error: "e2" })).toMatchObject({
      success: true,
      value: { state: "dead", lastError: { message: "e2", attempt: 2 } },
    });
    expect(await command({ command: "reschedule", id: "x", runAt: clock.now })).toMatchObject({
      success: false,
      error: expect.stringMatching(/^invalid_state: Job x is dead/),
    });
  });
});
