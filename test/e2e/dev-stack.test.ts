// End to end: `npm run dev` (redis-server, bridge, the worker in wrangler dev) driven with the typed
// client, then Ctrl-C (SIGINT) must leave no process behind.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../dev/redis-server";
import { createClient, type DelayqClient, type DelayqClientError } from "../../src/client";

const root = join(import.meta.dirname, "..", "..");
let stack: ChildProcess;
let dir: string;
let info: { apiUrl: string; apiToken: string; bridgeUrl: string; redisPort: number };
let dq: DelayqClient;

/** Whether any process of the stack's process group is still alive. */
function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "delayq-e2e-"));
  const port = await freePort();
  stack = spawn(process.execPath, ["--import", "tsx", "dev/stack.ts"], {
    cwd: root,
    detached: true,
    stdio: "ignore",
    env: {
      ...process.env,
      PORT: String(port),
      DQ_DEV_DIR: dir,
      DQ_TOKENS: "e2e-admin,e2e-shop:shop.*",
      DQ_POLL_INTERVAL_MS: "200",
    },
  });
  const file = join(dir, "stack.json");
  const deadline = Date.now() + 90_000;
  while (!existsSync(file)) {
    if (stack.exitCode !== null) throw new Error(`npm run dev exited (${stack.exitCode})`);
    if (Date.now() > deadline) throw new Error("npm run dev did not come up in 90 s");
    await new Promise((r) => setTimeout(r, 200));
  }
  info = JSON.parse(readFileSync(file, "utf8"));
  dq = createClient({ baseUrl: info.apiUrl, token: info.apiToken });
}, 120_000);

afterAll(async () => {
  if (stack?.pid && groupAlive(stack.pid)) process.kill(-stack.pid, "SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

describe("npm run dev", () => {
  it("writes stack.json with the documented fields", () => {
    expect(info).toEqual({
      apiUrl: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
      apiToken: "e2e-admin",
      bridgeUrl: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
      bridgeToken: expect.any(String),
      redisPort: expect.any(Number),
    });
  });

  it("add, wait, pop, finish: the job comes when due, not before", async () => {
    const { job } = await dq.add({ topic: "e2e", id: "first", delay: 1, body: { hello: "wörld" } });
    const [popped] = await dq.pop("e2e", { wait: 10 });
    expect(popped).toMatchObject({ id: "first", body: { hello: "wörld" }, attempts: 1 });
    expect(Date.now()).toBeGreaterThanOrEqual(job.dueAt);
    await dq.finish("first", { receipt: popped?.receipt });
    expect((await dq.get("first")).state).toBe("finished");
  });

  it("redelivers after the TTR without waiting for a cron tick", async () => {
    await dq.add({ topic: "e2e-ttr", id: "slow", ttr: 1 });
    const [first] = await dq.pop("e2e-ttr");
    const [second] = await dq.pop("e2e-ttr", { wait: 5 });
    expect(second).toMatchObject({ id: "slow", attempts: 2 });
    expect(second?.receipt).not.toBe(first?.receipt);
    const stale = await dq.finish("slow", { receipt: first?.receipt }).catch((e: unknown) => e);
    expect((stale as DelayqClientError).code).toBe("stale_receipt");
    await dq.finish("slow", { receipt: second?.receipt });
  });

  it("never hands out a deleted job", async () => {
    await dq.add({ topic: "e2e-del", id: "gone", delay: 0.5 });
    await dq.delete("gone");
    expect(await dq.pop("e2e-del", { wait: 1.5 })).toEqual([]);
    expect((await dq.get("gone")).state).toBe("deleted");
  });

  it("adds a batch and pops it in one go", async () => {
    const results = await dq.addBatch(
      Array.from({ length: 50 }, (_, i) => ({ topic: "e2e-batch", id: `b${i}`, body: i })),
    );
    expect(results.every((r) => "created" in r && r.created)).toBe(true);
    const jobs = await dq.pop("e2e-batch", { count: 100 });
    expect(jobs.map((j) => j.body).sort((a, b) => Number(a) - Number(b))).toEqual(
      Array.from({ length: 50 }, (_, i) => i),
    );
  });

  it("speaks the command protocol", async () => {
    const [add, pop, finish] = await dq.command([
      { command: "add", topic: "e2e-cmd", id: "c1", TTR: 30, body: "payload" },
      { command: "pop", topic: "e2e-cmd" },
      { command: "finish", id: "c1" },
    ]);
    expect(add).toEqual({ success: true, error: "", id: "c1", created: true });
    expect(pop).toEqual({
      success: true,
      error: "",
      id: "c1",
      value: "payload",
      receipt: expect.any(String),
    });
    expect(finish).toEqual({ success: true, error: "", id: "c1" });
  });

  it("keeps a scoped token to its topics", async () => {
    const shop = createClient({ baseUrl: info.apiUrl, token: "e2e-shop" });
    await shop.add({ topic: "shop.orders", id: "mine" });
    const denied = await shop.get("first").catch((e: unknown) => e);
    expect((denied as DelayqClientError).code).toBe("job_not_found");
  });

  it("runs the scheduled handler when the local cron calls it", async () => {
    const res = await fetch(`${info.apiUrl}/__scheduled?cron=*+*+*+*+*`);
    expect(res.status).toBe(200);
  });

  it("stops everything it started on SIGINT", async () => {
    const pid = stack.pid as number;
    process.kill(pid, "SIGINT");
    const deadline = Date.now() + 20_000;
    while (groupAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(groupAlive(pid)).toBe(false);
    await expect(fetch(`${info.apiUrl}/health`)).rejects.toThrow();
    await expect(fetch(`${info.bridgeUrl}/`)).rejects.toThrow();
  }, 30_000);
});
