// `npm run dev` (wrangler mode) without a network: its output must not look broken — no wrangler
// warning about `Request.cf`, no stack traces.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../dev/redis-server";

const root = join(import.meta.dirname, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "delayq-offline-"));
const cache = mkdtempSync(join(tmpdir(), "delayq-mf-cache-"));

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(cache, { recursive: true, force: true });
});

describe("npm run dev offline", () => {
  it("starts wrangler without the Request.cf warning or a stack trace", async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: String(await freePort()),
      DQ_DEV_DIR: dir,
      // Offline for sure, even on a machine with a network: wrangler's fetches go to a proxy
      // nobody listens on, and no cached cf.json (from an earlier online run) hides the fetch.
      HTTPS_PROXY: `http://127.0.0.1:${await freePort()}`,
      MINIFLARE_CACHE_DIR: cache,
    };
    // Miniflare skips the fetch under NODE_ENV=test (vitest's); `npm run dev` does not have it.
    delete env.NODE_ENV;
    delete env.CLOUDFLARE_CF_FETCH_ENABLED;
    delete env.CLOUDFLARE_CF_FETCH_PATH;
    const stack = spawn(process.execPath, ["--import", "tsx", "dev/stack.ts"], {
      cwd: root,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env,
    });
    let output = "";
    stack.stdout.on("data", (chunk: Buffer) => (output += chunk));
    stack.stderr.on("data", (chunk: Buffer) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => stack.once("exit", resolve));
    try {
      const deadline = Date.now() + 90_000;
      while (!existsSync(join(dir, "stack.json"))) {
        if (stack.exitCode !== null) throw new Error(`npm run dev exited: ${output}`);
        if (Date.now() > deadline) throw new Error(`npm run dev did not come up: ${output}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      process.kill(stack.pid as number, "SIGINT");
      expect(await exited).toBe(0);
    } finally {
      try {
        process.kill(-(stack.pid as number), "SIGKILL");
      } catch {
        // stopped already
      }
    }
    expect(output).toMatch(/\n {2}runs in +wrangler dev \(workerd\)/);
    expect(output).not.toContain("Request.cf");
    expect(output).not.toMatch(/ENOTFOUND|ECONNREFUSED/);
    expect(output).not.toMatch(/\n\s+at /);
  }, 120_000);
});
