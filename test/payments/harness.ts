// The service as buildService wires it (real Redis through the run's bridge) with the Alipay and
// WeChat Pay sandboxes on the wire, and what the watch suites do with it: call the API, run the
// due polls as a tick does, wait for a watch's state, pop a topic's outcomes, have the sandboxes
// send their signed notifications to the app. Accounts: "sandbox" (Alipay classic, WeChat Pay)
// and "sandbox-v3" (the same Alipay sandbox over OpenAPI v3).
import { createHash } from "node:crypto";
import type { Redis } from "@upstash/redis";
import {
  type AlipaySandbox,
  type AlipaySandboxOptions,
  startAlipaySandbox,
} from "../../dev/alipay-sandbox";
import {
  startWechatPaySandbox,
  type WechatPaySandbox,
  type WechatPaySandboxOptions,
} from "../../dev/wechatpay-sandbox";
import type { LogEntry } from "../../src/log";
import { parseWechatPayAccounts } from "../../src/payments/accounts";
import type { PaymentsOptions } from "../../src/payments/watch-types";
import { createPayments } from "../../src/payments/watches";
import { keys } from "../../src/redis/keys";
import { PAYMENTS_TOPIC } from "../../src/redis/lua/scripts/payments";
import { splitRecord } from "../../src/redis/record";
import { createScriptRunner, type RedisClient, type ScriptRunner } from "../../src/redis/runner";
import { createRun } from "../../src/run/run";
import type { Service } from "../../src/service";
import { bridgeService } from "../support/service";

/** Where the sandboxes send notifications: the app, reached in-process (never over the network). */
export const NOTIFY_ORIGIN = "http://delayq.test";

export type Called = { status: number; text: string; json: any };

/** An outcome job popped from a topic: its id, its body as JSON and as the text it was added as. */
export type Popped = { id: string; text: string; json: any };

export type Harness = {
  alipay: AlipaySandbox;
  wechat: WechatPaySandbox;
  service: Service;
  /** A client of the service's Redis user, to look at its keys. */
  redis: Redis;
  /** The service's key builders (its prefix). */
  key: ReturnType<typeof keys>;
  token: string;
  /** What the service logged so far. */
  logs: LogEntry[];
  call(method: string, path: string, body?: unknown, token?: string): Promise<Called>;
  /** Runs the polls that are due, as the Node entry's ticker does. */
  pollNow(): Promise<void>;
  /** Probes (running due polls between tries) until `probe` answers something, or throws. */
  until<T>(what: string, probe: () => Promise<T | undefined>, ms?: number): Promise<T>;
  /** The watch of `outTradeNo` once it reads `state`. */
  watchState(provider: string, outTradeNo: string, state: string, account?: string): Promise<any>;
  /** The watch as GET answers it. */
  payment(provider: string, outTradeNo: string, account?: string): Promise<any>;
  /** The outcome jobs of a pull topic so far (popped and finished). */
  outcomes(topic: string): Promise<Popped[]>;
  close(): Promise<void>;
};

/**
 * Starts the sandboxes and the service (its own key prefix `<name><label>`). `vars` add to or
 * override the service's environment. Until `close`, fetches to NOTIFY_ORIGIN reach the app.
 */
export async function startHarness(
  name: string,
  options: {
    vars?: Record<string, string>;
    alipay?: AlipaySandboxOptions;
    wechat?: WechatPaySandboxOptions;
  } = {},
): Promise<Harness> {
  const [alipay, wechat] = await Promise.all([
    startAlipaySandbox(options.alipay),
    startWechatPaySandbox(options.wechat),
  ]);
  const token = `${name}-admin`;
  const logs: LogEntry[] = [];
  const { service, redis, prefix } = bridgeService(
    name,
    {
      DQ_TOKENS: token,
      DQ_ALIPAY_ACCOUNTS: JSON.stringify({
        sandbox: alipay.account,
        "sandbox-v3": { ...alipay.account, api: "v3" },
      }),
      DQ_WECHATPAY_ACCOUNTS: JSON.stringify({ sandbox: wechat.account }),
      // Watches poll every few hundred ms, to run in seconds.
      DQ_MIN_POLL_MS: "0",
      ...options.vars,
    },
    (entry) => logs.push(entry),
  );
  const realFetch = globalThis.fetch;
  globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.origin === NOTIFY_ORIGIN) return service.app.request(url.pathname, init);
    return realFetch(input, init);
  }) as typeof fetch;

  const call: Harness["call"] = async (method, path, body, as = token) => {
    const res = await service.app.request(path, {
      method,
      headers: { authorization: `Bearer ${as}`, "content-type": "application/json" },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, json: text ? JSON.parse(text) : undefined };
  };
  const pollNow = async () => {
    await service.scheduler.tick(service.runs.tick({}));
  };
  const until: Harness["until"] = async (what, probe, ms = 10_000) => {
    const deadline = Date.now() + ms;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await pollNow();
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const payment: Harness["payment"] = async (provider, no, account = "sandbox") =>
    (await call("GET", `/v1/payments/${provider}/${account}/${no}`)).json?.payment;
  return {
    alipay,
    wechat,
    service,
    redis,
    key: keys(prefix),
    token,
    logs,
    call,
    pollNow,
    until,
    payment,
    watchState: (provider, no, state, account = "sandbox") =>
      until(`${provider}/${account}/${no} ${state}`, async () => {
        const got = await payment(provider, no, account);
        return got?.state === state ? got : undefined;
      }),
    async outcomes(topic) {
      const popped = await call("POST", `/v1/topics/${topic}/pop`, { count: 100 });
      const jobs = popped.json.jobs as { id: string; receipt: string; body: unknown }[];
      for (const job of jobs) {
        await call("POST", `/v1/jobs/${encodeURIComponent(job.id)}/finish`, {
          receipt: job.receipt,
        });
      }
      // The raw text of each body: the metadata is echoed byte for byte.
      return jobs.map((job, n) => ({
        id: job.id,
        text: popped.text.split('"body":')[n + 1] ?? "",
        json: job.body,
      }));
    },
    async close() {
      globalThis.fetch = realFetch;
      await Promise.all([alipay.close(), wechat.close()]);
    },
  };
}

/**
 * A watch's id as anyone can compute it from the order (base32 of SHA-256 over provider,
 * account and outTradeNo), here with node:crypto, independently of delayq's code.
 */
export function publicWatchId(provider: string, outTradeNo: string, account = "sandbox"): string {
  const digest = createHash("sha256").update(`${provider}\n${account}\n${outTradeNo}`).digest();
  let bits = "";
  for (const byte of digest) bits += byte.toString(2).padStart(8, "0");
  return Array.from(
    { length: 26 },
    (_, i) => "abcdefghijklmnopqrstuvwxyz234567"[parseInt(bits.slice(i * 5, i * 5 + 5), 2)],
  ).join("");
}

export const uid = () => crypto.randomUUID().slice(0, 8);

/**
 * Payments as the service builds them, on `redis` under a key prefix of its own, with the WeChat
 * Pay sandbox's account as "sandbox" and the test's `clock` (also its run's, which lasts an
 * hour), for suites that claim and poll themselves (claimPolls).
 */
export function clockedPayments(
  redis: RedisClient,
  wechat: WechatPaySandbox,
  clock: () => number,
  providerOptions?: PaymentsOptions["providerOptions"],
) {
  const scripts = createScriptRunner(redis, `clocked${uid()}`, 60_000);
  const run = createRun({ clock, subrequests: 10_000, lifetimeMs: 3_600_000, log: () => {} });
  const payments = createPayments({
    scripts,
    clock,
    alipay: new Map(),
    wechatpay: parseWechatPayAccounts({ sandbox: wechat.account }),
    defaults: { ttrMs: 60_000, maxAttempts: 10 },
    ...(providerOptions ? { providerOptions } : {}),
  });
  return { scripts, run, payments };
}

/**
 * Claims the poll jobs due by `at` (unix ms, also the claim's clock) as a run would, up to 10,
 * and answers them split into meta and body, for a test to hand to the poller itself.
 */
export async function claimPolls(scripts: ScriptRunner, at: number, topic = PAYMENTS_TOPIC) {
  const claimed = await scripts.run("claim", at, [at, 10, 100, crypto.randomUUID(), topic, 0]);
  return claimed.flatMap((group) => group.records.map(splitRecord));
}
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
