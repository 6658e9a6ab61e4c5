// The service's environment under `npm run dev -- --node`, read from /proc: QStash on (the
// stand-in), DQ_PUBLIC_URL the API, the sandboxes' accounts added to those given, every DQ_*
// passed on; and the accounts variables refused, naming them, when they are not a JSON object.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  generateRsaKeyPair,
  pemToBase64,
  privateKeyPem,
  publicKeyPem,
  randomSerialHex,
} from "../../dev/payment-keys";
import { freePort } from "../../dev/redis-server";
import { parseAlipayAccounts, parseWechatPayAccounts } from "../../src/payments/accounts";

const root = join(import.meta.dirname, "..", "..");
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "delayq-stack-env-"));
  dirs.push(dir);
  return dir;
};

type Run = { child: ChildProcess; output: () => string; exit: Promise<number | null> };

function runStack(env: Record<string, string>, flags: string[] = []): Run {
  const child = spawn(process.execPath, ["--import", "tsx", "dev/stack.ts", "--node", ...flags], {
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

const runs: Run[] = [];
afterAll(() => {
  for (const run of runs) {
    try {
      if (run.child.pid) process.kill(-run.child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The environment of the child of `parent` whose command line matches `command`, from /proc. */
function childEnvironment(parent: number, command: RegExp): Record<string, string> {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ");
      if (ppid !== parent || !command.test(cmdline)) continue;
      const environ = readFileSync(`/proc/${entry}/environ`, "utf8");
      return Object.fromEntries(
        environ
          .split("\0")
          .filter(Boolean)
          .map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)]),
      );
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no child of ${parent} runs ${command}`);
}

describe("npm run dev -- --node: the service's environment", () => {
  let info: Record<string, string | number>;
  let env: Record<string, string>;
  let shopAlipay: Record<string, string>;
  let shopWechat: Record<string, string>;

  beforeAll(async () => {
    const [alipayKeys, wechatKeys] = await Promise.all([
      generateRsaKeyPair(),
      generateRsaKeyPair(),
    ]);
    shopAlipay = {
      appId: "2021000000000777",
      privateKey: privateKeyPem(alipayKeys.privateKey),
      alipayPublicKey: pemToBase64(publicKeyPem(alipayKeys.publicKey)),
      api: "v3",
      baseUrl: "https://openapi.alipay.com",
    };
    shopWechat = {
      mchid: "1900000777",
      serialNo: randomSerialHex(),
      privateKey: privateKeyPem(wechatKeys.privateKey),
      apiV3Key: "0123456789abcdef0123456789abcdef",
      platformPublicKey: publicKeyPem(wechatKeys.publicKey),
      platformPublicKeyId: "PUB_KEY_ID_0119000007772025010100000000000000",
    };
    const dir = tempDir();
    const run = runStack({
      PORT: String(await freePort()),
      DQ_DEV_DIR: dir,
      DQ_ALIPAY_ACCOUNTS: JSON.stringify({ shop: shopAlipay }, null, 2),
      DQ_WECHATPAY_ACCOUNTS: JSON.stringify({ shop: shopWechat }),
      DQ_POLL_INTERVAL_MS: "250",
      // The stack runs on its own redis-server, whatever the shell says.
      REDIS_URL: "redis://127.0.0.1:1",
    });
    runs.push(run);
    const file = join(dir, "stack.json");
    const deadline = Date.now() + 30_000;
    while (!existsSync(file)) {
      if (run.child.exitCode !== null) throw new Error(`the stack exited: ${run.output()}`);
      if (Date.now() > deadline) throw new Error(`the stack did not come up: ${run.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    info = JSON.parse(readFileSync(file, "utf8"));
    env = childEnvironment(run.child.pid as number, /functions\/node\.ts/);
  }, 40_000);

  it("points QStash at the stand-in and DQ_PUBLIC_URL at the API", () => {
    expect(env).toMatchObject({
      QSTASH_URL: info.qstashUrl,
      QSTASH_TOKEN: info.qstashToken,
      QSTASH_CURRENT_SIGNING_KEY: info.qstashCurrentSigningKey,
      QSTASH_NEXT_SIGNING_KEY: info.qstashNextSigningKey,
      DQ_PUBLIC_URL: info.apiUrl,
      UPSTASH_REDIS_REST_URL: info.bridgeUrl,
      UPSTASH_REDIS_REST_TOKEN: info.bridgeToken,
      REDIS_URL: "",
    });
  });

  it("passes every DQ_* setting on, and the dev token when DQ_TOKENS is unset", () => {
    expect(env.DQ_POLL_INTERVAL_MS).toBe("250");
    expect(env.DQ_TOKENS).toBe("dev-token");
  });

  it("adds the Alipay sandbox's account to the one given, as delayq reads them", () => {
    const accounts = parseAlipayAccounts(env.DQ_ALIPAY_ACCOUNTS);
    expect([...accounts.keys()]).toEqual(["shop", "sandbox"]);
    expect(JSON.parse(env.DQ_ALIPAY_ACCOUNTS ?? "").shop).toEqual(shopAlipay);
    expect(accounts.get("sandbox")).toMatchObject({
      api: "classic",
      baseUrl: info.alipaySandboxUrl,
    });
  });

  it("adds the WeChat Pay sandbox's account (public-key mode) to the one given", () => {
    const accounts = parseWechatPayAccounts(env.DQ_WECHATPAY_ACCOUNTS);
    expect([...accounts.keys()]).toEqual(["shop", "sandbox"]);
    expect(JSON.parse(env.DQ_WECHATPAY_ACCOUNTS ?? "").shop).toEqual(shopWechat);
    expect(accounts.get("sandbox")).toMatchObject({
      baseUrl: info.wechatpaySandboxUrl,
      platformPublicKeyId: expect.stringMatching(/^PUB_KEY_ID_/),
    });
  });

  it("serves on the stack's own Redis, not the shell's REDIS_URL", async () => {
    const res = await fetch(`${info.apiUrl}/health`);
    expect(await res.json()).toEqual({ status: "ok", redis: "ok" });
  });
});

describe("npm run dev -- --node --certificates: the sandboxes in certificate mode", () => {
  let info: Record<string, string | number>;
  let env: Record<string, string>;
  beforeAll(async () => {
    const dir = tempDir();
    const run = runStack({ PORT: String(await freePort()), DQ_DEV_DIR: dir }, ["--certificates"]);
    runs.push(run);
    const file = join(dir, "stack.json");
    const deadline = Date.now() + 40_000;
    while (!existsSync(file)) {
      if (run.child.exitCode !== null) throw new Error(`the stack exited: ${run.output()}`);
      if (Date.now() > deadline) throw new Error(`the stack did not come up: ${run.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    info = JSON.parse(readFileSync(file, "utf8"));
    env = childEnvironment(run.child.pid as number, /functions\/node\.ts/);
  }, 50_000);

  it("gives the service certificate-mode sandbox accounts, whose chain it checked before serving", async () => {
    expect(info.paymentMode).toBe("certificate");
    const alipay = parseAlipayAccounts(env.DQ_ALIPAY_ACCOUNTS).get("sandbox");
    expect(alipay?.certificates?.appCertSn).toMatch(/^[0-9a-f]{32}$/);
    const wechat = parseWechatPayAccounts(env.DQ_WECHATPAY_ACCOUNTS).get("sandbox");
    expect(wechat?.platformCertificates).toHaveLength(1);
    expect(wechat?.platformPublicKeyId).toBeUndefined();
    // functions/node.ts listens only once Service.ready (the chain check) has settled.
    const res = await fetch(`${info.apiUrl}/health`);
    expect(await res.json()).toEqual({ status: "ok", redis: "ok" });
    // WeChat Pay's sandbox rotates its certificate through the control API.
    const rotated = await fetch(`${info.wechatpaySandboxUrl}/__sandbox/certificates/rotate`, {
      method: "POST",
    });
    expect(rotated.status).toBe(200);
  });
});

describe("npm run dev with unusable accounts", () => {
  const refused = async (env: Record<string, string>) => {
    const dir = tempDir();
    const run = runStack({ PORT: String(await freePort()), DQ_DEV_DIR: dir, ...env });
    runs.push(run);
    expect(await run.exit).toBe(1);
    expect(run.output()).not.toMatch(/\n\s+at /);
    expect(run.output()).not.toContain("s3cret");
    // Nothing started, no lock taken.
    expect(readdirSync(dir)).toEqual([]);
    return run.output();
  };

  it("stops when DQ_ALIPAY_ACCOUNTS is not JSON, naming it and where", async () => {
    const output = await refused({ DQ_ALIPAY_ACCOUNTS: '{"shop": {"privateKey": "s3cret",}}' });
    expect(output).toMatch(/^DQ_ALIPAY_ACCOUNTS is not valid JSON \(at character 34\)\./);
    expect(output).toContain(`the dev stack adds its Alipay sandbox's account ("sandbox")`);
  }, 20_000);

  it("stops when DQ_WECHATPAY_ACCOUNTS is not JSON, naming it", async () => {
    const output = await refused({ DQ_WECHATPAY_ACCOUNTS: "{shop: s3cret}" });
    expect(output).toMatch(/^DQ_WECHATPAY_ACCOUNTS is not valid JSON/);
  }, 20_000);

  it("stops when an accounts variable is JSON but not an object", async () => {
    const output = await refused({ DQ_WECHATPAY_ACCOUNTS: '["s3cret"]' });
    expect(output).toMatch(/^DQ_WECHATPAY_ACCOUNTS must be an object keyed by account name/);
  }, 20_000);

  it('stops when an account is already named "sandbox"', async () => {
    const output = await refused({ DQ_ALIPAY_ACCOUNTS: '{"sandbox": {"appId": "s3cret"}}' });
    expect(output).toMatch(/^DQ_ALIPAY_ACCOUNTS already has an account named "sandbox"/);
  }, 20_000);
});
