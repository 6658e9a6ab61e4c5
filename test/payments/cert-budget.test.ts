// A poll that downloads WeChat Pay's platform certificates pays for the download: the run's count
// of its subrequests (what DQ_SUBREQUESTS is held against) is what it made, counted at the wire.
import { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type FetchCounter, installFetchCounter, tallyTotal } from "../../bench/lib/subrequests";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import { buildService, type Service } from "../../src/service";
import { countingRedis } from "../support/subrequests";
import { postWatch } from "./support";

const TOKEN = "cert-budget-admin";
let wechat: WechatPaySandbox;
let service: Service;
let fetches: FetchCounter;

beforeAll(async () => {
  wechat = await startWechatPaySandbox({ mode: "certificate", mchid: "1900000041" });
  const sandboxOrigin = new URL(wechat.url).origin;
  fetches = installFetchCounter((url) => {
    if (url.origin !== sandboxOrigin) return undefined;
    return url.pathname.startsWith("/__") ? undefined : "provider";
  });
  const label = crypto.randomUUID().slice(0, 8);
  service = buildService(
    {
      UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
      UPSTASH_REDIS_REST_TOKEN: `${inject("bridgeToken")}:${label}`,
      DQ_TOKENS: TOKEN,
      DQ_PREFIX: `cbud${label}`,
      DQ_MIN_POLL_MS: "0",
      // A start's run pays for its own writes (3) and one poll (a claim, 1 + 5), no more: the
      // watch's second poll is left to the tick.
      DQ_SUBREQUESTS: "10",
      DQ_WECHATPAY_ACCOUNTS: JSON.stringify({ shop: wechat.account }),
    },
    (settings) =>
      countingRedis(
        new Redis({
          url: settings.url,
          token: settings.token,
          ...settings.options,
          enableAutoPipelining: false,
        }),
        fetches,
      ),
    { log: () => {} },
  );
}, 30_000);

afterAll(async () => {
  fetches?.uninstall();
  await wechat?.close();
});

describe("a poll that downloads the certificates", () => {
  it("counts the download among the run's subrequests", async () => {
    const no = `cb-${crypto.randomUUID().slice(0, 8)}`;
    wechat.createTrade(no);
    const res = await postWatch(service.app, TOKEN, {
      provider: "wechatpay",
      account: "shop",
      outTradeNo: no,
      schedule: [1],
      notify: [`r-${no}`],
    });
    expect(res.status).toBe(201);
    // The start's run polled once (the certificate known) and stopped there, for its budget.
    for (let waited = 0; ; waited += 50) {
      const got = await service.app.request(`/v1/payments/wechatpay/shop/${no}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      if (((await got.json()) as { payment: { polls: number } }).payment.polls >= 1) break;
      expect(waited).toBeLessThan(5000);
      await new Promise((r) => setTimeout(r, 50));
    }
    await wechat.rotateCertificate();
    const tally = fetches.tally("tick");
    const deferred: Promise<unknown>[] = [];
    const run = service.runs.tick({ waitUntil: (work) => deferred.push(work) });
    await fetches.run(tally, () => service.scheduler.tick(run));
    while (deferred.length > 0) await Promise.all(deferred.splice(0));
    // The query and the download; and the tick's Redis calls (its claim, the watch's read, the
    // transition, ...).
    expect(tally.counts.provider).toBe(2);
    expect(run.budget.taken()).toBe(tallyTotal(tally, ["provider", "redisCalls"]));
  });
});
