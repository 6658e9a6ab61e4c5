// Values with quotes, backslashes, line breaks, `$` and non-ASCII reach the worker in `wrangler dev`
// byte for byte: through the env file dev/service-process.ts writes (read by wrangler's bundled
// dotenv and dotenv-expand), and through `npm run dev` itself (a DQ_TOKENS token with " and \).
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  generateRsaKeyPair,
  pemToBase64,
  privateKeyPem,
  publicKeyPem,
} from "../../dev/payment-keys";
import { freePort } from "../../dev/redis-server";
import { envFileLine, formatEnvFile, startService } from "../../dev/service-process";

const root = join(import.meta.dirname, "..", "..");
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "delayq-quoting-"));
  dirs.push(dir);
  return dir;
};

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

// Shell-style references that dotenv-expand would expand if the env file let it.
// biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${...}, on purpose
const PATH_REF = "${PATH}";
// biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${...}, on purpose
const DEFAULT_REF = "${X:-y}";

/** Values of every shape the env file must carry, one per quoting it uses. */
async function trickyValues(): Promise<Record<string, string>> {
  const pem = privateKeyPem((await generateRsaKeyPair()).privateKey);
  const odd = `say "hi" \\ $HOME ${PATH_REF} \\$HOME #not-a-comment \`tick\` 支付宝 🧾 \u2028 end`;
  return {
    // JSON with PEM keys (\n escapes), quotes, backslashes, $, #, non-ASCII: as the stack writes
    // DQ_ALIPAY_ACCOUNTS (no ', which it writes \u0027).
    DQ_JSON: JSON.stringify({ shop: { appId: "2021", privateKey: pem, note: odd } }),
    // A raw PEM: real line breaks, one at the end.
    DQ_PEM: pem,
    // Pretty-printed JSON with an apostrophe: several lines, and ' inside.
    DQ_PRETTY: JSON.stringify({ shop: { subject: 'Ann\'s "shop"', key: pem } }, null, 2),
    // ' and ` but no ": CR and LF too.
    DQ_BOTH_QUOTES: `it's \`here\`\r\nline 2 $HOME \\$ \\\\ ${DEFAULT_REF}`,
    // Every quote and a trailing backslash, on one line (a token may look like this).
    DQ_TOKEN_LIKE: "e2e\"q\\uote$HOME'x`y\\",
    DQ_EMPTY: "",
    DQ_PADDED: "  padded, with = and #  ",
  };
}

describe("the env file for wrangler dev", () => {
  it("uses each quoting for the values that need it", async () => {
    const forms = Object.entries(await trickyValues()).map(([name, value]) => {
      const first = envFileLine(name, value)?.[name.length + 1] ?? "none";
      return `'"\``.includes(first) ? first : "bare";
    });
    // The fixture takes every branch of envFileLine.
    expect(forms).toEqual(["'", "'", "`", '"', "bare", "'", "'"]);
  });

  it("refuses a value no quoting carries, naming the variable and not the value", () => {
    const secret = "s3cret'`\"#";
    expect(envFileLine("DQ_X", secret)).toBeUndefined();
    expect(() => formatEnvFile({ DQ_OK: "fine", DQ_X: secret })).toThrow(
      /^DQ_X cannot be passed to wrangler dev: .*npm run dev -- --node$/,
    );
    try {
      formatEnvFile({ DQ_X: secret });
    } catch (error) {
      expect(String(error)).not.toContain("s3cret");
    }
    expect(() => formatEnvFile({ "DQ BAD": "x" })).toThrow(/not a variable name wrangler dev/);
  });

  it("reaches a worker in wrangler dev byte for byte, and nothing else does", async () => {
    const dir = tempDir();
    writeFileSync(
      join(dir, "echo.js"),
      "export default { fetch: (request, env) => Response.json(env) };\n",
    );
    writeFileSync(
      join(dir, "echo.toml"),
      'name = "env-echo"\nmain = "echo.js"\ncompatibility_date = "2026-04-26"\n',
    );
    const vars = await trickyValues();
    // What the service would refuse to run with, if it leaked from the environment.
    const saved = process.env.CLOUDFLARE_INCLUDE_PROCESS_ENV;
    process.env.CLOUDFLARE_INCLUDE_PROCESS_ENV = "true";
    let service: Awaited<ReturnType<typeof startService>> | undefined;
    try {
      service = await startService({
        mode: "wrangler",
        port: await freePort(),
        vars,
        stateDir: join(dir, "state"),
        wranglerConfig: join(dir, "echo.toml"),
        stdio: "ignore",
        // Inside the test's own time limit: a start that gives up stops wrangler itself, where
        // a test that timed out first would leave it running after the worker process is gone.
        healthTimeoutMs: 100_000,
      });
      const env = await (await fetch(`${service.url}/`)).json();
      expect(env).toEqual(vars);
    } finally {
      if (saved === undefined) delete process.env.CLOUDFLARE_INCLUDE_PROCESS_ENV;
      else process.env.CLOUDFLARE_INCLUDE_PROCESS_ENV = saved;
      await service?.stop();
    }
  }, 150_000);
});

type Run = { child: ChildProcess; output: () => string; exit: Promise<number | null> };

function runStack(args: string[], env: Record<string, string>): Run {
  const child = spawn(process.execPath, ["--import", "tsx", "dev/stack.ts", ...args], {
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

function killGroup(run: Run | undefined): void {
  try {
    if (run?.child.pid) process.kill(-run.child.pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/**
 * Stops `npm run dev` as Ctrl-C would: SIGTERM lets it stop wrangler, which runs in a process
 * group of its own that a SIGKILL of the stack's group would leave running (4 GB each).
 */
async function stopStack(run: Run | undefined): Promise<void> {
  if (!run?.child.pid || run.child.exitCode !== null) return killGroup(run);
  try {
    process.kill(run.child.pid, "SIGTERM");
  } catch {
    return;
  }
  const stopped = await Promise.race([
    run.exit.then(() => true),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 20_000)),
  ]);
  if (!stopped) killGroup(run);
}

describe('npm run dev (wrangler) with tokens holding " and \\, and accounts given', () => {
  // Tokens cannot hold , : or spaces; anything else goes. The first needs backticks (it has '),
  // the second single quotes; both would come out changed from a JSON-quoted env file.
  const admin = "e2e\"admin\\n$HOME'#x";
  const shop = `sh\\"op${PATH_REF}`;
  let run: Run;
  let apiUrl: string;

  beforeAll(async () => {
    const dir = tempDir();
    const keys = await generateRsaKeyPair();
    // An account the stack adds its sandbox's to: the service refuses to start on accounts it
    // cannot parse, so coming up at all says the JSON (PEM, quotes, $, non-ASCII) arrived whole.
    const given = {
      shop: {
        appId: `app'"\\$HOME ${PATH_REF} 支付宝`,
        privateKey: privateKeyPem(keys.privateKey),
        alipayPublicKey: pemToBase64(publicKeyPem(keys.publicKey)),
      },
    };
    run = runStack([], {
      PORT: String(await freePort()),
      DQ_DEV_DIR: dir,
      DQ_TOKENS: `${admin},${shop}:shop.*`,
      DQ_ALIPAY_ACCOUNTS: JSON.stringify(given),
    });
    const file = join(dir, "stack.json");
    const deadline = Date.now() + 90_000;
    while (!existsSync(file)) {
      if (run.child.exitCode !== null) throw new Error(`npm run dev exited: ${run.output()}`);
      if (Date.now() > deadline) throw new Error(`npm run dev did not come up: ${run.output()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const info = JSON.parse(readFileSync(file, "utf8"));
    apiUrl = info.apiUrl;
    expect(info.apiToken).toBe(admin);
  }, 120_000);

  afterAll(() => stopStack(run), 30_000);

  const call = (token: string, method: string, path: string, body?: unknown) =>
    fetch(`${apiUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  it("accepts the tokens exactly as given", async () => {
    expect((await call(admin, "GET", "/v1/topics")).status).toBe(200);
    expect((await call(shop, "POST", "/v1/jobs", { topic: "shop.a", id: "q1" })).status).toBe(201);
    // The scope after the token's ':' arrived too.
    expect((await call(shop, "POST", "/v1/jobs", { topic: "other", id: "q2" })).status).toBe(403);
  });

  it("refuses tokens a byte away from them", async () => {
    for (const near of [
      admin.replace("$HOME", process.env.HOME ?? ""), // expanded, as dotenv-expand would
      admin.replace('"', '\\"'), // escaped, as JSON.stringify writes it
      admin.replace("\\", ""),
      shop.replace(PATH_REF, ""),
      shop.replace('\\"', '"'),
    ]) {
      expect(near).not.toBe(admin);
      expect((await call(near, "GET", "/v1/topics")).status).toBe(401);
    }
  });
});

describe("npm run dev (wrangler) with a value its env file cannot carry", () => {
  it("stops at once, naming the variable, before starting anything", async () => {
    const dir = tempDir();
    const run = runStack([], {
      PORT: String(await freePort()),
      DQ_DEV_DIR: dir,
      DQ_SOME_SECRET: "abc'`\"#def",
    });
    try {
      expect(await run.exit).toBe(1);
    } finally {
      killGroup(run);
    }
    expect(run.output()).toMatch(/^DQ_SOME_SECRET cannot be passed to wrangler dev: /);
    expect(run.output()).not.toContain("abc'");
    expect(run.output()).not.toMatch(/\n\s+at /);
    expect(readdirSync(dir)).toEqual([]);
  }, 20_000);
});
