// The service's idle tick (issue 5's target: ≤ 2 Redis commands), measured through delayq's own
// service (buildService, its scheduler with the drain and push steps) rather than the library's
// tick() that bench/costs.ts measures: on a fresh service, then once a pulled job and a pushed
// one have been through their lives and nothing is due. `npx tsx bench/idle-tick.ts`.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { commandDelta } from "./lib/measure";
import { openServiceStack } from "./lib/service-stack";
import { installFetchCounter } from "./lib/subrequests";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const fetches = installFetchCounter(() => "any");
let delivered = 0;
const receiver = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    delivered += 1;
    res.writeHead(204);
    res.end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
const stack = await openServiceStack({ fetches, peers: async () => ({}), env: () => ({}) });
try {
  const idleTick = async () => {
    const before = await stack.counter.snapshot();
    await stack.tick(fetches.tally("tick"));
    return commandDelta(before, await stack.counter.snapshot());
  };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await stack.request(fetches.tally(path), method, path, body);
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, unknown>;
  };
  const fresh = await idleTick();
  await call("PUT", "/v1/topics/pushed", { push: { url, secret: "bench-idle-secret-0001" } });
  await call("POST", "/v1/jobs", { topic: "pushed", id: "p1", delay: 1 });
  await call("POST", "/v1/jobs", { topic: "pulled", id: "q1", delay: 1 });
  await sleep(1500);
  const popped = (await call("POST", "/v1/topics/pulled/pop", {})) as {
    jobs: { id: string; receipt: string }[];
  };
  const job = popped.jobs[0];
  if (job) await call("POST", `/v1/jobs/${job.id}/finish`, { receipt: job.receipt });
  while (delivered < 1) await sleep(100);
  await sleep(500);
  await idleTick(); // the first tick after them tidies what they left (the schedule's entries)
  const after = [await idleTick(), await idleTick(), await idleTick()];
  console.log(`idle tick, fresh service: ${fresh.total} ${JSON.stringify(fresh.byCommand)}`);
  for (const [i, delta] of after.entries()) {
    console.log(
      `idle tick ${i + 1} after a pulled and a pushed job: ${delta.total} ${JSON.stringify(delta.byCommand)}`,
    );
  }
} finally {
  await stack.close();
  fetches.uninstall();
  receiver.close();
}
