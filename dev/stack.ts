// `npm run dev`: the whole local stack — redis-server, the Upstash-REST bridge, the QStash stand-in,
// the Alipay and WeChat Pay sandboxes (public-key mode; `--certificates`: certificate mode), and
// the worker in `wrangler dev` (or `--node`: functions/node.ts) with a local cron — until Ctrl-C.
import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startAlipaySandbox } from "./alipay-sandbox";
import { writeFileAtomic } from "./atomic-file";
import { startBridge } from "./bridge";
import { startQStash } from "./qstash";
import { portInUse, RedisNotInstalledError, startRedisServer } from "./redis-server";
import { EnvFileError, formatEnvFile, startService } from "./service-process";
import { startWechatPaySandbox } from "./wechatpay-sandbox";

const root = join(import.meta.dirname, "..");
/** Where the stack keeps its Redis data and stack.json; DQ_DEV_DIR moves it (the e2e test does). */
const stateDir = process.env.DQ_DEV_DIR ?? join(root, ".dev");
const DEV_TOKEN = "dev-token";
/** The name of the sandboxes' accounts in DQ_ALIPAY_ACCOUNTS / DQ_WECHATPAY_ACCOUNTS. */
const SANDBOX_ACCOUNT = "sandbox";

type Part = { name: string; stop(): Promise<void> };

/** A refusal to start, said as is (no "npm run dev failed:" prefix, no stack). */
class StackError extends Error {}

/** What the lock file holds: the stack's pid, and its redis-server's once that runs. */
type LockInfo = { pid: number; redisPid?: number };

/**
 * Whether `pid` is a live process running `command`. Where /proc can be read, a pid reused by an
 * unrelated process does not count, so a stale lock left by a killed stack never blocks a start.
 */
function running(pid: number | undefined, command: RegExp): boolean {
  if (!pid || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    return command.test(readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " "));
  } catch {
    return true; // no /proc here (macOS): the pid is alive, take it as ours
  }
}

/**
 * Takes the state dir for this process: `stack.pid`, created with link(2) so that it appears
 * complete or not at all, and two stacks never both see it free. A lock whose stack is gone is
 * taken over, unless the redis-server that stack started still runs on the same data.
 */
function lockStateDir(file: string): { update(info: LockInfo): void; release(): void } {
  const mine: LockInfo = { pid: process.pid };
  const temp = `${file}.${process.pid}`;
  writeFileSync(temp, JSON.stringify(mine));
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        linkSync(temp, file);
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 0) throw error;
      }
      let held: LockInfo | undefined;
      try {
        held = JSON.parse(readFileSync(file, "utf8")) as LockInfo;
      } catch {
        held = undefined; // unreadable: left half-written by nobody we know, so stale
      }
      if (held && running(held.pid, /stack/)) {
        throw new StackError(
          [
            `npm run dev is already running from ${join(file, "..")} (pid ${held.pid}).`,
            "Use that one, stop it first (Ctrl-C in its terminal), or start another stack with",
            "its own folder and port: DQ_DEV_DIR=.dev2 PORT=8788 npm run dev",
          ].join("\n"),
        );
      }
      if (held && running(held.redisPid, /redis-server/)) {
        throw new StackError(
          [
            `A redis-server (pid ${held.redisPid}) left by an earlier npm run dev still uses`,
            `${join(file, "..", "redis")}; a second one would corrupt its data.`,
            `Stop it (kill ${held.redisPid}) and run npm run dev again.`,
          ].join("\n"),
        );
      }
      rmSync(file, { force: true });
    }
  } finally {
    rmSync(temp, { force: true });
  }
  const ours = () => {
    try {
      return (JSON.parse(readFileSync(file, "utf8")) as LockInfo).pid === process.pid;
    } catch {
      return false;
    }
  };
  return {
    update(info) {
      if (ours()) writeFileAtomic(file, JSON.stringify(info), 0o644);
    },
    release() {
      if (ours()) rmSync(file, { force: true });
    },
  };
}

/** Refuses ports something already listens on, before anything is started. */
async function checkPorts(ports: { name: string; port: number; variable: string }[]) {
  for (const { name, port, variable } of ports) {
    if (port !== 0 && (await portInUse(port))) {
      throw new StackError(
        [
          `Port ${port} (the ${name}) is already in use, perhaps by another npm run dev.`,
          `Stop what listens there, or choose another port: ${variable}=${port + 1} npm run dev`,
        ].join("\n"),
      );
    }
  }
}

/**
 * The accounts already given in `variable` (a JSON object keyed by account name), to which the
 * stack adds its sandbox's. Said plainly when unusable; the value holds keys, so it is never quoted
 * (nor is JSON.parse's message, which may quote it).
 */
function givenAccounts(variable: string, provider: string): Record<string, unknown> {
  const text = process.env[variable];
  if (text === undefined || text.trim() === "") return {};
  const shape = `an object keyed by account name, e.g. ${variable}='{"shop": {...}}'`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    const at = /at position (\d+)/.exec(error instanceof Error ? error.message : "")?.[1];
    throw new StackError(
      [
        `${variable} is not valid JSON${at === undefined ? "" : ` (at character ${Number(at) + 1})`}.`,
        `Give ${shape}, or unset it:`,
        `the dev stack adds its ${provider} sandbox's account ("${SANDBOX_ACCOUNT}") to those given there.`,
      ].join("\n"),
    );
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new StackError(`${variable} must be ${shape}.`);
  }
  if (Object.hasOwn(parsed, SANDBOX_ACCOUNT)) {
    throw new StackError(
      [
        `${variable} already has an account named "${SANDBOX_ACCOUNT}", the name the dev stack`,
        `gives its ${provider} sandbox's account. Rename yours and run npm run dev again.`,
      ].join("\n"),
    );
  }
  return parsed as Record<string, unknown>;
}

/**
 * The given accounts and the sandbox's, as the JSON text of the accounts variable. `'` is written
 * \u0027 (the same JSON), so that wrangler's env file can always single-quote the value.
 */
function withSandbox(given: Record<string, unknown>, account: unknown): string {
  return JSON.stringify({ ...given, [SANDBOX_ACCOUNT]: account }).replaceAll("'", "\\u0027");
}

async function main(): Promise<void> {
  const mode = process.argv.includes("--node") ? "node" : "wrangler";
  // The sandboxes' accounts: Alipay's public key and the WeChat Pay public key (what new merchants
  // get), or with --certificates Alipay's public-key certificates and WeChat Pay's platform
  // certificates.
  const paymentMode = process.argv.includes("--certificates") ? "certificate" : "publicKey";
  const parts: Part[] = [];
  const stackFile = join(stateDir, "stack.json");
  let lock: ReturnType<typeof lockStateDir> | undefined;
  let wroteStackFile = false;
  let stopping = false;
  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    for (const part of parts.reverse()) {
      await part.stop().catch((error: unknown) => {
        console.error(`could not stop ${part.name}: ${String(error)}`);
      });
    }
    // stack.json names live ports only: it goes with the stack (and is never another stack's).
    if (wroteStackFile) rmSync(stackFile, { force: true });
    lock?.release();
    process.exit(code);
  };
  process.on("SIGINT", () => void stopAll(0));
  process.on("SIGTERM", () => void stopAll(0));

  try {
    const apiPort = Number(process.env.PORT ?? 8787);
    const bridgePort = Number(process.env.BRIDGE_PORT ?? 0);
    const apiTokens = process.env.DQ_TOKENS ?? DEV_TOKEN;
    const apiToken = (apiTokens.split(",")[0] ?? "").split(":")[0]?.trim() || DEV_TOKEN;
    // Every DQ_* setting reaches the service (DQ_DEV_DIR is the stack's own).
    const given: Record<string, string> = {};
    for (const [name, value] of Object.entries(process.env)) {
      if (name.startsWith("DQ_") && name !== "DQ_DEV_DIR" && value !== undefined)
        given[name] = value;
    }
    const alipayGiven = givenAccounts("DQ_ALIPAY_ACCOUNTS", "Alipay");
    const wechatpayGiven = givenAccounts("DQ_WECHATPAY_ACCOUNTS", "WeChat Pay");
    if (mode === "wrangler") {
      // A value wrangler's env file cannot carry stops the start here, before anything runs (the
      // accounts are rewritten below, in a form it always can).
      const { DQ_ALIPAY_ACCOUNTS: _alipay, DQ_WECHATPAY_ACCOUNTS: _wechatpay, ...rest } = given;
      try {
        formatEnvFile(rest);
      } catch (error) {
        if (error instanceof EnvFileError) throw new StackError(error.message);
        throw error;
      }
    }

    // These checks come before anything starts, so a refused start leaves a running stack as is.
    mkdirSync(stateDir, { recursive: true });
    lock = lockStateDir(join(stateDir, "stack.pid"));
    await checkPorts([
      { name: "API", port: apiPort, variable: "PORT" },
      { name: "Upstash bridge", port: bridgePort, variable: "BRIDGE_PORT" },
    ]);

    const redis = await startRedisServer({ dir: join(stateDir, "redis"), appendOnly: true });
    parts.push({ name: "redis-server", stop: redis.stop });
    lock.update({ pid: process.pid, redisPid: redis.process.pid });
    redis.process.once("exit", (code, signal) => {
      // Ctrl-C reaches redis-server too (same process group); give our own SIGINT a moment.
      setTimeout(() => {
        if (stopping) return;
        console.error(
          `redis-server (port ${redis.port}) exited (${signal ?? `code ${code}`}); the API ` +
            "cannot work without it, so the stack stops. Its data stays in " +
            `${join(stateDir, "redis")}; run npm run dev again.`,
        );
        void stopAll(1);
      }, 200);
    });

    const bridgeToken = `bridge-${crypto.randomUUID()}`;
    const bridge = await startBridge({
      redisPort: redis.port,
      tokens: bridgeToken,
      port: bridgePort,
    });
    parts.push({ name: "bridge", stop: bridge.close });

    // Started side by side (each sandbox makes its RSA keys first); each is stopped with the rest.
    const [qstash, alipay, wechatpay] = await Promise.all([
      startQStash().then((qstash) => {
        parts.push({ name: "QStash stand-in", stop: qstash.close });
        return qstash;
      }),
      startAlipaySandbox({ mode: paymentMode }).then((sandbox) => {
        parts.push({ name: "Alipay sandbox", stop: () => sandbox.close() });
        return sandbox;
      }),
      startWechatPaySandbox({ mode: paymentMode }).then((sandbox) => {
        parts.push({ name: "WeChat Pay sandbox", stop: () => sandbox.close() });
        return sandbox;
      }),
    ]);

    const apiUrl = `http://127.0.0.1:${apiPort}`;
    // The worker's environment: the bridge as its Upstash database, QStash on (the stand-in, with
    // the API's own URL for its callbacks), then the DQ_* settings given, which win; the
    // sandboxes' accounts are added to any given.
    const vars: Record<string, string> = {
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridgeToken,
      QSTASH_URL: qstash.url,
      QSTASH_TOKEN: qstash.token,
      QSTASH_CURRENT_SIGNING_KEY: qstash.currentSigningKey,
      QSTASH_NEXT_SIGNING_KEY: qstash.nextSigningKey,
      DQ_PUBLIC_URL: apiUrl,
      DQ_TOKENS: apiTokens,
      ...given,
      DQ_ALIPAY_ACCOUNTS: withSandbox(alipayGiven, alipay.account),
      DQ_WECHATPAY_ACCOUNTS: withSandbox(wechatpayGiven, wechatpay.account),
    };
    // On Node a REDIS_URL from the shell would win over the bridge; empty means unset there.
    if (mode === "node") vars.REDIS_URL = "";
    const service = await startService({ mode, port: apiPort, vars, stateDir });
    parts.push({ name: `service (${mode})`, stop: service.stop });
    service.child.once("exit", (code) => {
      if (!stopping) {
        console.error(`the service exited (code ${code}); stopping the stack`);
        void stopAll(1);
      }
    });

    // Locally crons never fire by themselves: trigger the scheduled handler once a minute.
    // (functions/node.ts runs its own ticker.)
    if (mode === "wrangler") {
      const ticker = setInterval(
        () => {
          fetch(`${service.url}/__scheduled?cron=*+*+*+*+*`).catch((error: unknown) => {
            console.error(`local cron: ${String(error)}`);
          });
        },
        Number(process.env.DQ_DEV_TICK_MS ?? 60_000),
      );
      parts.push({ name: "local cron", stop: async () => clearInterval(ticker) });
    }

    const stack = {
      apiUrl: service.url,
      apiToken,
      bridgeUrl: bridge.url,
      bridgeToken,
      redisPort: redis.port,
      qstashUrl: qstash.url,
      qstashToken: qstash.token,
      qstashCurrentSigningKey: qstash.currentSigningKey,
      qstashNextSigningKey: qstash.nextSigningKey,
      alipaySandboxUrl: alipay.url,
      wechatpaySandboxUrl: wechatpay.url,
      // The documented fields (DESIGN §8) only, unless the sandboxes run in certificate mode.
      ...(paymentMode === "certificate" ? { paymentMode } : {}),
    };
    // Written last, once everything answers: a reader never finds ports that are not up. Written
    // whole or not at all: a reader that sees it appear may parse it at once.
    writeFileAtomic(stackFile, `${JSON.stringify(stack, null, 2)}\n`);
    wroteStackFile = true;
    // Only the dev default token is shown; one given in DQ_TOKENS stays out of the terminal.
    const token =
      apiTokens === DEV_TOKEN ? `bearer token: ${DEV_TOKEN}` : "bearer token in stack.json";
    const control = "control API at /__sandbox/trades";
    const certificates = paymentMode === "certificate";
    const alipayMode = certificates ? "certificate mode" : "public-key mode";
    const wechatpayMode = certificates
      ? "certificate mode; POST /__sandbox/certificates/rotate"
      : "public-key mode";
    console.log(
      [
        "",
        `delayq API         ${service.url}   (${token})`,
        `  runs in          ${mode === "node" ? "Node (functions/node.ts)" : "wrangler dev (workerd), cron every minute"}`,
        `  dashboard        ${service.url}/dashboard`,
        `  docs             ${service.url}/docs`,
        `QStash stand-in    ${qstash.url}   (QStash's /v2 API; token and signing keys in stack.json)`,
        `Alipay sandbox     ${alipay.url}   (account "${SANDBOX_ACCOUNT}", classic and v3, ${alipayMode}; ${control})`,
        `WeChat Pay sandbox ${wechatpay.url}   (account "${SANDBOX_ACCOUNT}", ${wechatpayMode}; ${control})`,
        `Upstash bridge     ${bridge.url}   (token in stack.json)`,
        `redis-server       127.0.0.1:${redis.port}   (data in ${join(stateDir, "redis")}, append-only)`,
        `wrote ${stackFile}; Ctrl-C stops everything`,
        "",
      ].join("\n"),
    );
  } catch (error) {
    console.error(
      error instanceof RedisNotInstalledError || error instanceof StackError
        ? error.message
        : `npm run dev failed: ${error instanceof Error ? error.message : String(error)}`,
    );
    await stopAll(1);
  }
}

void main();
