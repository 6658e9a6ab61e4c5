// A watch's start hands the polls due within seconds to the background. When Redis times out
// there (the benchmark's 10,000 watches on a busy machine: 257 of them), the failure is logged and
// the watch is polled by the next tick; it must never become a rejection nobody handles, which
// ends a Node process (functions/node.ts has no ExecutionContext: the work just runs on).
// The service as buildService wires it, on the run's bridge and the WeChat Pay sandbox; Redis
// answers every call for real, except the claims made while `timingOut` is set, which fail as
// @upstash/redis fails when DQ_REDIS_TIMEOUT_MS runs out (a TimeoutError).
import { Redis } from "@upstash/redis";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import type { LogEntry } from "../../src/log";
import { scriptText } from "../../src/redis/lua/scripts";
import { claim } from "../../src/redis/lua/scripts/push";
import type { RedisClient } from "../../src/redis/runner";
import { buildService, type Service } from "../../src/service";
import { postWatch } from "./support";

const TOKEN = "background-admin";

let wechat: WechatPaySandbox;
let service: Service;
let timingOut = false;
const logs: LogEntry[] = [];
const strays: unknown[] = [];
const onStray = (reason: unknown) => strays.push(reason);

/** The real client, whose claims fail with a timeout while `timingOut` is set. */
function timingOutClaims(redis: RedisClient): RedisClient {
  const claimText = scriptText(claim);
  return {
    createScript(text) {
      const script = redis.createScript(text);
      return {
        exec(keys, args) {
          if (timingOut && text === claimText) {
            return Promise.reject(
              new DOMException("The operation was aborted due to timeout", "TimeoutError"),
            );
          }
          return script.exec(keys, args);
        },
      };
    },
    get: (key) => redis.get(key),
  };
}

beforeAll(async () => {
  wechat = await startWechatPaySandbox();
  const label = crypto.randomUUID().slice(0, 8);
  service = buildService(
    {
      UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
      UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
      DQ_TOKENS: TOKEN,
      DQ_PREFIX: `bg${label}`,
      DQ_MIN_POLL_MS: "0",
      DQ_WECHATPAY_ACCOUNTS: JSON.stringify({ sandbox: wechat.account }),
    },
    (settings) =>
      timingOutClaims(new Redis({ url: settings.url, token: settings.token, ...settings.options })),
    { log: (entry) => logs.push(entry) },
  );
  process.on("unhandledRejection", onStray);
}, 30_000);

afterEach(() => {
  timingOut = false;
});

afterAll(async () => {
  process.off("unhandledRejection", onStray);
  await wechat?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function payment(order: string) {
  const res = await service.app.request(`/v1/payments/wechatpay/sandbox/${order}`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  return ((await res.json()) as { payment: { state: string; polls: number } }).payment;
}

describe("a start whose background polls fail", () => {
  it("logs the failure with its route, leaves no unhandled rejection, and the next tick polls the watch", async () => {
    const order = `bg-${crypto.randomUUID().slice(0, 8)}`;
    wechat.createTrade(order);
    timingOut = true;
    // No executionCtx: as on Node, the background work runs on after the answer.
    const res = await postWatch(service.app, TOKEN, {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: order,
      schedule: [0.25, 120],
      deadline: Date.now() + 600_000,
      notify: [`results-${order}`],
    });
    expect(res.status, await res.clone().text()).toBe(201);

    const deadline = Date.now() + 5000;
    // The run's loop logs the claim that failed, naming the invocation (its path) and the topic.
    while (!logs.some((entry) => entry.event === "push_failed") && Date.now() < deadline) {
      await sleep(20);
    }
    // Unhandled rejections are reported on a later turn than the rejection: give them one.
    await sleep(100);
    expect(strays).toEqual([]);
    const failed = logs.filter((entry) => entry.event === "push_failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ level: "error", path: "/v1/payments", topic: "__payments" });
    expect(logs.filter((entry) => entry.event === "background_failed")).toEqual([]);
    expect(String(failed[0]?.message)).toMatch(/Redis did not answer within DQ_REDIS_TIMEOUT_MS/);
    expect(JSON.stringify(failed)).not.toContain(TOKEN);
    expect((await payment(order)).polls).toBe(0);

    // Redis answers again: the watch's poll, due already, is the next tick's.
    timingOut = false;
    const deferred: Promise<unknown>[] = [];
    await service.scheduler.tick(service.runs.tick({ waitUntil: (work) => deferred.push(work) }));
    await Promise.all(deferred);
    const after = await payment(order);
    expect(after.polls).toBe(1);
    expect(after.state).toBe("polling");
  });
});
