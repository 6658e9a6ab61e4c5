// End to end: `npm run dev` (redis-server, bridge, QStash stand-in, payment sandboxes, the worker in
// wrangler dev) driven with the typed client, then Ctrl-C (SIGINT) must leave no process behind.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Receiver } from "@upstash/qstash";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../dev/redis-server";
import { createClient, type DelayqClient, type DelayqClientError } from "../../src/client";

const root = join(import.meta.dirname, "..", "..");
let stack: ChildProcess;
let output = "";
let dir: string;
let info: {
  apiUrl: string;
  apiToken: string;
  bridgeUrl: string;
  redisPort: number;
  qstashUrl: string;
  qstashCurrentSigningKey: string;
  qstashNextSigningKey: string;
  alipaySandboxUrl: string;
  wechatpaySandboxUrl: string;
};
let dq: DelayqClient;
/** A push receiver: what it got, answered 200. */
let hook: Server;
const hooked: { headers: IncomingHttpHeaders; body: string; at: number }[] = [];

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
  hook = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      hooked.push({ headers: req.headers, body: Buffer.concat(chunks).toString(), at: Date.now() });
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((resolve) => hook.listen(0, "127.0.0.1", resolve));
  stack = spawn(process.execPath, ["--import", "tsx", "dev/stack.ts"], {
    cwd: root,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      PORT: String(port),
      DQ_DEV_DIR: dir,
      DQ_TOKENS: "e2e-admin,e2e-shop:shop.*",
      DQ_POLL_INTERVAL_MS: "200",
    },
  });
  stack.stdout?.on("data", (chunk: Buffer) => (output += chunk));
  stack.stderr?.on("data", (chunk: Buffer) => (output += chunk));
  const file = join(dir, "stack.json");
  const deadline = Date.now() + 90_000;
  while (!existsSync(file)) {
    if (stack.exitCode !== null) throw new Error(`npm run dev exited: ${output}`);
    if (Date.now() > deadline) throw new Error("npm run dev did not come up in 90 s");
    await new Promise((r) => setTimeout(r, 200));
  }
  info = JSON.parse(readFileSync(file, "utf8"));
  dq = createClient({ baseUrl: info.apiUrl, token: info.apiToken });
}, 120_000);

afterAll(async () => {
  if (stack?.pid && groupAlive(stack.pid)) process.kill(-stack.pid, "SIGKILL");
  await new Promise<void>((resolve) => (hook ? hook.close(() => resolve()) : resolve()));
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
      qstashUrl: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
      qstashToken: expect.stringMatching(/^\S{16,}$/),
      qstashCurrentSigningKey: expect.stringMatching(/^sig_\w+$/),
      qstashNextSigningKey: expect.stringMatching(/^sig_\w+$/),
      alipaySandboxUrl: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
      wechatpaySandboxUrl: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
    });
    expect(info.qstashCurrentSigningKey).not.toBe(info.qstashNextSigningKey);
  });

  it("prints one line for the dashboard, the docs, the QStash stand-in and each sandbox", () => {
    const line = (label: string, url: string) =>
      expect(output.split("\n").filter((l) => l.startsWith(label) && l.includes(url))).toHaveLength(
        1,
      );
    line("  dashboard", `${info.apiUrl}/dashboard`);
    line("  docs", `${info.apiUrl}/docs`);
    line("QStash stand-in", info.qstashUrl);
    line("Alipay sandbox", info.alipaySandboxUrl);
    line("WeChat Pay sandbox", info.wechatpaySandboxUrl);
    // DQ_TOKENS was given: its tokens are not printed.
    expect(output).not.toContain("e2e-admin");
  });

  it("runs both payment sandboxes, each with its control API", async () => {
    for (const base of [info.alipaySandboxUrl, info.wechatpaySandboxUrl]) {
      const created = await fetch(`${base}/__sandbox/trades`, {
        method: "POST",
        body: JSON.stringify({ outTradeNo: "e2e-trade-1" }),
      });
      expect(created.status).toBe(201);
      const paid = await fetch(`${base}/__sandbox/trades/e2e-trade-1/pay`, { method: "POST" });
      expect(paid.status).toBe(200);
    }
  });

  it("pushes through the QStash stand-in: signed by QStash, settled by its callback", async () => {
    const url = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
    await dq.configureTopic("e2e-push", { push: { url, via: "qstash" } });
    const { job } = await dq.add({ topic: "e2e-push", id: "pushed", delay: 1, body: { n: 1 } });
    const deadline = Date.now() + 15_000;
    while (hooked.length === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const [got] = hooked;
    expect(got?.at).toBeGreaterThanOrEqual(job.dueAt);
    expect(JSON.parse(got?.body ?? "null")).toMatchObject({ id: "pushed", body: { n: 1 } });
    // Only QStash signs with these keys: a direct delivery has no Upstash-Signature at all.
    const receiver = new Receiver({
      currentSigningKey: info.qstashCurrentSigningKey,
      nextSigningKey: info.qstashNextSigningKey,
    });
    const signature = String(got?.headers["upstash-signature"]);
    expect(await receiver.verify({ signature, body: got?.body ?? "", url })).toBe(true);
    const forged = new Receiver({
      currentSigningKey: info.qstashNextSigningKey,
      nextSigningKey: info.qstashNextSigningKey,
    });
    await expect(forged.verify({ signature, body: got?.body ?? "", url })).rejects.toThrow();
    // QStash's callback reached the API at DQ_PUBLIC_URL and finished the job.
    let state = "";
    while (state !== "finished" && Date.now() < deadline) {
      state = (await dq.get("pushed")).state;
      if (state !== "finished") await new Promise((r) => setTimeout(r, 100));
    }
    expect(state).toBe("finished");
    expect(hooked).toHaveLength(1);
  }, 20_000);

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
    await expect(fetch(`${info.qstashUrl}/v2/dlq`)).rejects.toThrow();
    await expect(fetch(`${info.alipaySandboxUrl}/__sandbox/requests`)).rejects.toThrow();
    await expect(fetch(`${info.wechatpaySandboxUrl}/__sandbox/requests`)).rejects.toThrow();
  }, 30_000);
});
