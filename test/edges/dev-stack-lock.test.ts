// `npm run dev` next to a running stack: a second one on the same folder or port stops at once and
// leaves the first untouched; a stale lock is taken over; a dead redis-server stops the stack.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, type RedisServer, startRedisServer } from "../../dev/redis-server";
import { RespConnection } from "../../dev/resp";

const root = join(import.meta.dirname, "..", "..");

type Run = { child: ChildProcess; output: () => string; exit: Promise<number | null> };

/** Starts dev/stack.ts in Node mode (no wrangler: quicker) in its own process group. */
function runStack(env: Record<string, string>): Run {
  const child = spawn(process.execPath, ["--import", "tsx", "dev/stack.ts", "--node"], {
    cwd: root,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk));
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output: () => output, exit };
}

/** The exit code, or "still running" after `ms` (the bug this suite guards against). */
async function exitWithin(run: Run, ms: number): Promise<number | null | "still running"> {
  const timer = new Promise<"still running">((r) => setTimeout(() => r("still running"), ms));
  return Promise.race([run.exit, timer]);
}

function killGroup(run: Run | undefined): void {
  try {
    if (run?.child.pid) process.kill(-run.child.pid, "SIGKILL");
  } catch {
    // already gone
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A pid that belonged to a process which has exited. */
const deadPid = () => spawnSync("true").pid as number;

async function health(url: string): Promise<number> {
  return (await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) })).status;
}

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "delayq-lock-"));
  dirs.push(dir);
  return dir;
};
const others: Run[] = [];
let dir: string;
let first: Run;
let info: { apiUrl: string; redisPort: number };
let stackJson: string;

beforeAll(async () => {
  dir = tempDir();
  // A lock left by a stack that was killed: it must not block this start.
  writeFileSync(join(dir, "stack.pid"), JSON.stringify({ pid: deadPid() }));
  first = runStack({ PORT: String(await freePort()), DQ_DEV_DIR: dir });
  const file = join(dir, "stack.json");
  const deadline = Date.now() + 30_000;
  while (!existsSync(file)) {
    if (first.child.exitCode !== null) throw new Error(`the stack exited: ${first.output()}`);
    if (Date.now() > deadline) throw new Error(`the stack did not come up: ${first.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  stackJson = readFileSync(file, "utf8");
  info = JSON.parse(stackJson);
}, 40_000);

afterAll(() => {
  killGroup(first);
  for (const run of others) killGroup(run);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The first stack runs as before: same stack.json, same lock, its API and redis-server answer. */
async function expectFirstUntouched(): Promise<void> {
  expect(readFileSync(join(dir, "stack.json"), "utf8")).toBe(stackJson);
  const lock = JSON.parse(readFileSync(join(dir, "stack.pid"), "utf8"));
  expect(lock.pid).toBe(first.child.pid);
  expect(await health(info.apiUrl)).toBe(200);
  const redis = await RespConnection.open(info.redisPort);
  const reply = await redis.call("INFO", "server");
  redis.close();
  expect(String(reply.type === "bulk" ? reply.value : "")).toContain(`${lock.redisPid}`);
}

describe("npm run dev beside a running stack", () => {
  it("took over the stale lock and holds its own", () => {
    const lock = JSON.parse(readFileSync(join(dir, "stack.pid"), "utf8"));
    expect(lock).toEqual({ pid: first.child.pid, redisPid: expect.any(Number) });
  });

  it("refuses a second stack on the same folder at once, starting nothing", async () => {
    const second = runStack({ PORT: String(await freePort()), DQ_DEV_DIR: dir });
    others.push(second);
    expect(await exitWithin(second, 10_000)).toBe(1);
    expect(second.output()).toContain(
      `npm run dev is already running from ${dir} (pid ${first.child.pid})`,
    );
    expect(second.output()).not.toMatch(/\n\s+at /);
    await expectFirstUntouched();
  }, 30_000);

  it("refuses a second stack on the same port at once, starting nothing", async () => {
    const other = tempDir();
    const port = new URL(info.apiUrl).port;
    const second = runStack({ PORT: port, DQ_DEV_DIR: other });
    others.push(second);
    expect(await exitWithin(second, 10_000)).toBe(1);
    expect(second.output()).toContain(`Port ${port} (the API) is already in use`);
    expect(readdirSync(other)).toEqual([]);
    await expectFirstUntouched();
  }, 30_000);

  it("refuses a stale lock whose redis-server still runs on the data", async () => {
    const other = tempDir();
    let orphan: RedisServer | undefined;
    try {
      orphan = await startRedisServer({ dir: join(other, "redis") });
      const redisPid = orphan.process.pid;
      writeFileSync(join(other, "stack.pid"), JSON.stringify({ pid: deadPid(), redisPid }));
      const second = runStack({ PORT: String(await freePort()), DQ_DEV_DIR: other });
      others.push(second);
      expect(await exitWithin(second, 10_000)).toBe(1);
      expect(second.output()).toContain(`A redis-server (pid ${redisPid}) left by an earlier`);
      expect(existsSync(join(other, "stack.json"))).toBe(false);
    } finally {
      await orphan?.stop();
    }
  }, 30_000);

  it("stops, saying why, when its redis-server dies", async () => {
    const { redisPid } = JSON.parse(readFileSync(join(dir, "stack.pid"), "utf8"));
    process.kill(redisPid, "SIGKILL");
    expect(await exitWithin(first, 10_000)).toBe(1);
    expect(first.output()).toMatch(/redis-server \(port \d+\) exited \(SIGKILL\).*the stack stops/);
    const pid = first.child.pid as number;
    const deadline = Date.now() + 5000;
    while (groupAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(groupAlive(pid)).toBe(false);
    await expect(health(info.apiUrl)).rejects.toThrow();
    expect(existsSync(join(dir, "stack.json"))).toBe(false);
    expect(existsSync(join(dir, "stack.pid"))).toBe(false);
  }, 30_000);
});
