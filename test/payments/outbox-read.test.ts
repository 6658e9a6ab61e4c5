// A watch read as concluded has its outcome jobs in their topics, on a partitioned deployment too
// (16 partitions here, on one Redis or the node-cluster project's cluster): an outcome for a topic
// of another partition than home's goes through the outbox (redis/routing.ts), applied by the
// concluding call after its script, or by a read. Two processes: one polls and concludes the
// watch, its outbox step held back; the other reads the watch as paid meanwhile.
//
// Real parts: the scripts on the run's Redis, the WeChat Pay sandbox on the wire, Payments as the
// service builds them, the poll job claimed and handed to the poller as the dispatcher does.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import { DelayQueue } from "../../src/index";
import { parseWechatPayAccounts } from "../../src/payments/accounts";
import { createPayments } from "../../src/payments/watches";
import { partitions } from "../../src/redis/partitions";
import { createScriptRunner, type RedisClient } from "../../src/redis/runner";
import { createRun } from "../../src/run/run";
import { testRedis } from "../support/redis";
import { claimPolls, uid } from "./harness";

const EVERYONE = { scope: undefined, accounts: undefined };
const PARTITIONS = 16;

let wechat: WechatPaySandbox;
beforeAll(async () => {
  wechat = await startWechatPaySandbox();
}, 30_000);
afterAll(async () => {
  await wechat?.close();
});

/** The scripts the test acts around (each script's text names it in its first comment). */
const NAMES = ["outboxRead", "watchRead", "watchPolled"];

type Around = (script: string, call: () => Promise<unknown>) => Promise<unknown>;

/** `redis` with `around` wrapped about each script call, by the script's name. */
function hooked(redis: RedisClient, around: Around): RedisClient {
  const functions = redis.delayqFunctions;
  return {
    get: (key) => redis.get(key),
    createScript(lua) {
      const inner = redis.createScript(lua);
      const name = NAMES.find((each) => lua.includes(`--[[ ${each}:`)) ?? "";
      return { exec: (keys, args) => around(name, () => inner.exec(keys, args)) };
    },
    ...(functions && {
      delayqFunctions: {
        load: (library) => functions.load(library),
        call: (fn, keys, args) =>
          around(fn.slice(fn.lastIndexOf("_") + 1), () => functions.call(fn, keys, args)),
      },
    }),
  };
}

describe("a watch read on a partitioned deployment", () => {
  it("answers it concluded only with its outcome in the notify topic, while the concluding process has not applied it yet", async () => {
    const base = testRedis({ automaticDeserialization: false });
    const prefix = base.prefix.slice(0, -1);
    const client = base.redis as unknown as RedisClient;
    // The poller's process: once its watchPolled answered, its outbox steps wait for `release`.
    let held: Promise<void> | undefined;
    let release = () => {};
    let concluded: (() => void) | undefined;
    const pollerScripts = createScriptRunner(
      hooked(client, async (name, call) => {
        if (name === "outboxRead" && held !== undefined) await held;
        const reply = await call();
        if (name === "watchPolled" && concluded) {
          held = new Promise((resolve) => {
            release = resolve;
          });
          concluded();
        }
        return reply;
      }),
      prefix,
      60_000,
      PARTITIONS,
    );
    // The reader's process: its watch read waits, once, for `beforeRead`.
    let beforeRead: (() => Promise<void>) | undefined;
    const readerScripts = createScriptRunner(
      hooked(client, async (name, call) => {
        const first = name === "watchRead" ? beforeRead : undefined;
        if (first) {
          beforeRead = undefined;
          await first();
        }
        return call();
      }),
      prefix,
      60_000,
      PARTITIONS,
    );
    let t = Math.floor(Date.now() / 1000) * 1000;
    const clock = () => t;
    const run = createRun({ clock, subrequests: 10_000, lifetimeMs: 3_600_000, log: () => {} });
    const build = (scripts: typeof pollerScripts) =>
      createPayments({
        scripts,
        clock,
        alipay: new Map(),
        wechatpay: parseWechatPayAccounts({ sandbox: wechat.account }),
        defaults: { ttrMs: 60_000, maxAttempts: 10 },
      });
    const poller = build(pollerScripts);
    const reader = build(readerScripts);
    // A notify topic of another partition than home's (0): its outcome goes through the outbox.
    const layout = partitions(prefix, PARTITIONS);
    const topic = ["results", "orders", "paid"].find((name) => layout.ofTopic(name) !== 0);
    const order = { provider: "wechatpay" as const, account: "sandbox", outTradeNo: `o${uid()}` };
    wechat.createTrade(order.outTradeNo);
    wechat.pay(order.outTradeNo);
    const started = await poller.start(
      run,
      { ...order, schedule: [5], notify: [topic as string] },
      EVERYONE,
    );
    expect(started.created).toBe(true);

    // The read waits until the poll concluded the watch paid, the poller's outbox step held.
    t = (await reader.get(order, EVERYONE)).nextPollAt as number;
    let polling: Promise<unknown> | undefined;
    beforeRead = async () => {
      const done = new Promise<void>((resolve) => {
        concluded = resolve;
      });
      const [job] = await claimPolls(pollerScripts, t);
      polling = poller.poller.run(job as NonNullable<typeof job>, run);
      await done;
    };
    expect((await reader.get(order, EVERYONE)).state).toBe("paid");
    const queue = new DelayQueue({ redis: base.redis, scripts: readerScripts, prefix, clock });
    const popped = await queue.pop(topic as string, { count: 10 });
    release();
    await polling;
    const events = popped.map((job) => {
      const body = typeof job.body === "string" ? JSON.parse(job.body) : job.body;
      return (body as { event: string }).event;
    });
    expect(events).toEqual(["payment.paid"]);
  });
});
