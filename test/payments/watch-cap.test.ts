// DQ_MAX_WATCHES_PER_TOKEN: each token may have so many watches polling (payments and refunds
// together); one more is 429 too_many_watches and writes nothing. Every way a watch ends (an
// outcome from a poll or a notification, expiry, a stop) gives its place back, once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tokenIdOf } from "../../src/http/auth";
import { type Harness, NOTIFY_ORIGIN, startHarness, uid } from "./harness";

const WECHAT = `${NOTIFY_ORIGIN}/v1/notify/wechatpay/sandbox`;

let h: Harness;
const ADMIN = "cap-admin";
const SHOP = "cap-shop-token";
const OTHER = "cap-other-token";

beforeAll(async () => {
  h = await startHarness("cap", {
    vars: {
      DQ_TOKENS: [ADMIN, `${SHOP}:shop.*|*/sandbox`, `${OTHER}:other.*|*/sandbox`].join(","),
      DQ_MAX_WATCHES_PER_TOKEN: "3",
    },
  });
}, 30_000);

afterAll(async () => {
  await h?.close();
});

/** A WeChat Pay order's watch, started by `token`; it polls every few hundred ms unless told. */
const watch = (token: string, no: string, extra: Record<string, unknown> = {}) =>
  h.call(
    "POST",
    "/v1/payments",
    {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [60],
      notify: [`${token === OTHER ? "other" : "shop"}.r-${uid()}`],
      ...extra,
    },
    token,
  );

/** How many watches Redis counts for `token`, read from its key. */
const counted = async (token: string) =>
  Number((await h.redis.get(h.key.tokenWatches(await tokenIdOf(token)))) ?? 0);

describe("the watches one token may have polling", () => {
  it("refuses one more than DQ_MAX_WATCHES_PER_TOKEN with 429 too_many_watches, writing nothing", async () => {
    const nos = [`a-${uid()}`, `b-${uid()}`];
    for (const no of nos) expect((await watch(SHOP, no)).status).toBe(201);
    // A refund watch counts as well.
    const order = `o-${uid()}`;
    const refundNo = `rf-${uid()}`;
    h.wechat.createTrade(order, { total: 100 });
    h.wechat.pay(order);
    h.wechat.createRefund(order, refundNo, { refund: 50 });
    const refund = await h.call(
      "POST",
      "/v1/refunds",
      {
        provider: "wechatpay",
        account: "sandbox",
        outRefundNo: refundNo,
        schedule: [60],
        notify: [`shop.r-${uid()}`],
      },
      SHOP,
    );
    expect(refund.status).toBe(201);
    expect(await counted(SHOP)).toBe(3);

    const over = await watch(SHOP, `c-${uid()}`);
    expect(over.status).toBe(429);
    expect(over.json.error.code).toBe("too_many_watches");
    expect(over.json.error.message).toContain("DQ_MAX_WATCHES_PER_TOKEN=3");
    const overRefund = await h.call(
      "POST",
      "/v1/refunds",
      {
        provider: "wechatpay",
        account: "sandbox",
        outRefundNo: `rf-${uid()}`,
        notify: [`shop.r-${uid()}`],
      },
      SHOP,
    );
    expect(overRefund.json.error.code).toBe("too_many_watches");
    expect(await counted(SHOP)).toBe(3);
    // Nothing of the refused one was written.
    const listed = await h.redis.zrange(h.key.watches, 0, -1);
    expect(listed.length).toBe(2);

    // Starting a watch already there is no new watch: answered as it is, not refused.
    expect((await watch(SHOP, nos[0] as string)).status).toBe(200);
    // Another token has its own count.
    expect((await watch(OTHER, `x-${uid()}`)).status).toBe(201);
    expect(await counted(OTHER)).toBe(1);

    // A stop gives its place back, once: stopping it again changes nothing.
    for (let i = 0; i < 2; i++) {
      const stopped = await h.call(
        "DELETE",
        `/v1/payments/wechatpay/sandbox/${nos[0]}`,
        undefined,
        SHOP,
      );
      expect(stopped.status).toBe(200);
    }
    expect(await counted(SHOP)).toBe(2);
    expect((await watch(SHOP, `d-${uid()}`)).status).toBe(201);
    expect((await watch(SHOP, `e-${uid()}`)).status).toBe(429);
  });

  it("counts a watch out when it ends with an outcome, expires or is settled by a notification", async () => {
    // OTHER starts afresh: one watch from the test above.
    const before = await counted(OTHER);
    const paid = `p-${uid()}`;
    h.wechat.createTrade(paid, { total: 100 });
    expect((await watch(OTHER, paid, { schedule: [0.2] })).status).toBe(201);
    const expiring = `x-${uid()}`;
    h.wechat.createTrade(expiring, { total: 100 });
    expect(
      (await watch(OTHER, expiring, { schedule: [0.2], deadline: Date.now() + 600 })).status,
    ).toBe(201);
    // Each ends in the background (the expiring one may already have), and counts out once.
    h.wechat.pay(paid);
    await h.watchState("wechatpay", paid, "paid");
    await h.watchState("wechatpay", expiring, "expired");
    expect(await counted(OTHER)).toBe(before);

    // A late payment of the expired order changes no count (the watch had ended already).
    h.wechat.pay(expiring);
    await h.wechat.notify(expiring, WECHAT);
    await h.until("the late payment", async () => {
      const got = await h.payment("wechatpay", expiring);
      return got?.state === "paid" ? got : undefined;
    });
    expect(await counted(OTHER)).toBe(before);

    // A notification that settles a polling watch counts it out too.
    const notified = `n-${uid()}`;
    h.wechat.createTrade(notified, { total: 100 });
    expect((await watch(OTHER, notified, { schedule: [3600] })).status).toBe(201);
    expect(await counted(OTHER)).toBe(before + 1);
    h.wechat.pay(notified);
    await h.wechat.notify(notified, WECHAT);
    await h.watchState("wechatpay", notified, "paid");
    expect(await counted(OTHER)).toBe(before);
  });

  it("shows each token's count in /metrics: all to an unlimited token, its own to a limited one", async () => {
    const scrape = async (token: string) => {
      const res = await h.service.app.request("/metrics", {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(200);
      return (await res.text()).split("\n").filter((line) => line.startsWith("delayq_token_"));
    };
    const [shop, other] = [await counted(SHOP), await counted(OTHER)];
    // DQ_TOKENS: ADMIN (entry 1), SHOP (2), OTHER (3).
    expect(await scrape(ADMIN)).toEqual([
      'delayq_token_watches{token="1"} 0',
      `delayq_token_watches{token="2"} ${shop}`,
      `delayq_token_watches{token="3"} ${other}`,
      "delayq_token_watches_max 3",
    ]);
    expect(await scrape(SHOP)).toEqual([
      `delayq_token_watches{token="2"} ${shop}`,
      "delayq_token_watches_max 3",
    ]);
    expect(shop).toBeGreaterThan(0);
  });

  it("keeps no token in Redis: the count's key and the watch name the token by its id", async () => {
    const id = await tokenIdOf(SHOP);
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    const keys = await h.redis.keys(`${h.key.base}*`);
    for (const key of keys) expect(key).not.toContain(SHOP);
    const [watchId] = await h.redis.zrange(h.key.watches, -1, -1);
    const fields = (await h.redis.hgetall(h.key.watch(watchId as string))) ?? {};
    expect(JSON.stringify(fields)).not.toContain(SHOP);
  });
});
