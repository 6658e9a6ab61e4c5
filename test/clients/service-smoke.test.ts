// The test service helper: functions/node.ts as a process, reachable with its tokens.
import { afterAll, beforeAll, expect, it } from "vitest";
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
