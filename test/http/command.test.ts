// POST /v1/command: the Youzan command protocol, its envelope and its errors.
import { describe, expect, it } from "vitest";
import { runCommand } from "../../src/protocols/youzan";
import { testApp } from "../support/app";

describe("POST /v1/command", () => {
  it("runs add, pop, finish and delete as the design's protocol does", async () => {
    const { call, clock } = testApp();
    const add = await call("POST", "/v1/command", {
      body: { command: "add", topic: "t", id: "x", delay: 30, TTR: 60, body: { order: 7 } },
    });
    expect(add).toMatchObject({
      status: 200,
      json: { success: true, error: "", id: "x", created: true },
    });
    // Adding it again is no failure: the answer says the stored job was kept (issue 8.17).
    const again = await call("POST", "/v1/command", {
      body: { command: "add", topic: "t", id: "x", body: { order: 8 } },
    });
    expect(again.json).toEqual({ success: true, error: "", id: "x", created: false });
    expect((await call("GET", "/v1/jobs/x")).json.job).toMatchObject({ ttr: 60, state: "delayed" });

    const nothing = await call("POST", "/v1/command", { body: { command: "pop", topic: "t" } });
    expect(nothing.json).toEqual({ success: true, error: "" });

    clock.advance(30_000);
    const pop = await call("POST", "/v1/command", { body: { command: "pop", topic: "t" } });
    // The receipt comes with the job, so that the protocol alone can finish it (issue 8.17).
    expect(pop.json).toEqual({
      success: true,
      error: "",
      id: "x",
      value: { order: 7 },
      receipt: expect.stringMatching(/^p1(\.[0-9a-z]+){3}$/),
    });
    const stale = await call("POST", "/v1/command", {
      body: { command: "finish", id: "x", receipt: `${pop.json.receipt}9` },
    });
    expect(stale.json.error).toMatch(/^stale_receipt: /);
    const finish = await call("POST", "/v1/command", {
      body: { command: "finish", id: "x", receipt: pop.json.receipt },
    });
    expect(finish.json).toEqual({ success: true, error: "", id: "x" });

    await call("POST", "/v1/command", { body: { command: "add", topic: "t", id: "y", ttr: 5 } });
    const del = await call("POST", "/v1/command", { body: { command: "delete", id: "y" } });
    expect(del.json).toEqual({ success: true, error: "", id: "y" });
    expect((await call("GET", "/v1/jobs/y")).json.job.state).toBe("deleted");
  });

  it("runs get, touch, release and bury, answering the job as value", async () => {
    const { call } = testApp();
    await call("POST", "/v1/command", { body: { command: "add", topic: "t", id: "j" } });
    const got = await call("POST", "/v1/command", { body: { command: "get", id: "j" } });
    expect(got.json.value).toMatchObject({ id: "j", state: "ready" });
    await call("POST", "/v1/command", { body: { command: "pop", topic: "t" } });
    const touched = await call("POST", "/v1/command", { body: { command: "touch", id: "j" } });
    expect(touched.json.value.state).toBe("reserved");
    const released = await call("POST", "/v1/command", {
      body: { command: "release", id: "j", delay: 5 },
    });
    expect(released.json.value.state).toBe("delayed");
    const buried = await call("POST", "/v1/command", { body: { command: "bury", id: "j" } });
    expect(buried.json).toMatchObject({
      success: false,
      error: expect.stringMatching(/^not_reserved/),
    });
  });

  it("runs an array of commands in order, each with its own envelope", async () => {
    const { call } = testApp();
    const res = await call("POST", "/v1/command", {
      body: [
        { command: "add", topic: "t", id: "a", body: "first" },
        { command: "pop", topic: "t" },
        { command: "finish", id: "a" },
        { command: "finish", id: "missing" },
        { command: "explode" },
        { command: "add", topic: "t", ttr: 5, TTR: 6 },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.json).toEqual([
      { success: true, error: "", id: "a", created: true },
      { success: true, error: "", id: "a", value: "first", receipt: expect.any(String) },
      { success: true, error: "", id: "a" },
      { success: false, error: expect.stringMatching(/^job_not_found: /), id: "missing" },
      { success: false, error: expect.stringMatching(/^invalid_request: .*command/) },
      { success: false, error: expect.stringMatching(/^invalid_request: .*TTR and ttr differ/) },
    ]);
  });

  it("lets the pops of an array wait until one shared end, not each its own wait", async () => {
    const t = testApp({ pollIntervalMs: 50 });
    const started = Date.now();
    const waitUntil = started + 600;
    const results = [];
    for (const topic of ["empty-a", "empty-b", "empty-c"]) {
      results.push(
        await runCommand(t.queue, { command: "pop", topic, wait: 5 }, undefined, waitUntil),
      );
    }
    const took = Date.now() - started;
    expect(results).toEqual([0, 1, 2].map(() => ({ success: true, error: "" })));
    // Each would have waited 5 s: together they waited about the 600 ms they share.
    expect(took).toBeGreaterThanOrEqual(550);
    expect(took).toBeLessThan(4000);
  });

  it("answers success false for a bad command and 400 for a body that is no command at all", async () => {
    const { call } = testApp();
    const bad = await call("POST", "/v1/command", { body: { command: "add", topic: "no spaces" } });
    expect(bad.status).toBe(200);
    expect(bad.json).toMatchObject({ success: false, error: expect.stringMatching(/topic/) });
    expect((await call("POST", "/v1/command", { body: "{" })).status).toBe(400);
    expect((await call("POST", "/v1/command", { body: [] })).status).toBe(400);
  });
});
