// The test service helper: functions/node.ts as a process, reachable with its tokens.
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { bridgeStats } from "../support/redis";
import { startTestService, type TestService } from "../support/service";

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
}, 60_000);
afterAll(async () => service?.stop());

it("serves the API with the admin token and refuses a wrong one", async () => {
  const ok = await fetch(`${service.url}/v1/topics/smoke`, {
    headers: { authorization: `Bearer ${service.token}` },
  });
  expect(ok.status).toBe(200);
  const bad = await fetch(`${service.url}/v1/topics/smoke`, {
    headers: { authorization: "Bearer nope" },
  });
  expect(bad.status).toBe(401);
});

it("sends the Redis commands of one turn over REST in one /pipeline request, none auto-pipelined", async () => {
  // The service's bridge token is the run's with the service's label: its own counters.
  const label = service.prefix.slice("svc".length);
  const token = `${inject("bridgeToken")}:${label}`;
  const before = await bridgeStats(inject("bridgeUrl"), token);
  const headers = { authorization: `Bearer ${service.token}`, "content-type": "application/json" };
  // 250 jobs: three add calls (100, 100, 50), sent at once.
  const jobs = Array.from({ length: 250 }, (_, i) => ({ topic: "smoke-rest", body: { i } }));
  const added = await fetch(`${service.url}/v1/jobs/batch`, {
    method: "POST",
    headers,
    body: JSON.stringify({ jobs }),
  });
  expect(added.status).toBe(200);
  const after = await bridgeStats(inject("bridgeUrl"), token);
  // The three calls are issued together: one /pipeline request of three commands (turnPipelining),
  // not three requests, nor a Pipeline built per command (auto-pipelining).
  expect(after.requests.pipeline - before.requests.pipeline).toBe(1);
  expect(after.requests.single - before.requests.single).toBe(0);
  expect(after.commands - before.commands).toBe(3);
});
