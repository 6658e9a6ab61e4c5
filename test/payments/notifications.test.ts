// The providers' notifications through the service, the bridge's Redis and the sandboxes: a
// verified Alipay notification is taken while fresh (its notify_time neither more than 5 minutes
// ahead nor older than Alipay's 25-hour resend window), and a notification whose id the watch
// took before (Alipay's notify_id, WeChat Pay's event id: resends keep them) is acknowledged
// again without acting.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, NOTIFY_ORIGIN, publicWatchId, startHarness, uid } from "./harness";

let h: Harness;
const ALIPAY = `${NOTIFY_ORIGIN}/v1/notify/alipay/sandbox`;
const WECHAT = `${NOTIFY_ORIGIN}/v1/notify/wechatpay/sandbox`;
const HOUR = 3600_000;

beforeAll(async () => {
  h = await startHarness("notify");
}, 30_000);

afterAll(async () => {
  await h?.close();
});

/** A watch of a new, paid Alipay order that only a notification will settle. */
async function paidAlipayOrder(topic: string) {
  const no = `n-${uid()}`;
  h.alipay.createTrade(no, { totalAmount: "1.00" });
  const started = await h.call("POST", "/v1/payments", {
    provider: "alipay",
    account: "sandbox",
    outTradeNo: no,
    schedule: [3600],
    notify: [topic],
  });
  expect(started.status).toBe(201);
  h.alipay.pay(no);
  return no;
}

describe("an Alipay notification's freshness", () => {
  it.each([
    ["dated 26 h ago", -26 * HOUR, /stale: notify_time 26 h old/],
    // notify_time counts whole seconds, and our clock moves on before it is read: 359 or 360.
    ["dated 6 minutes ahead", 6 * 60_000, /stale: notify_time 3(59|60) s ahead of our clock/],
  ])("refuses one %s (fail): the watch is untouched, the log says why", async (_, offset, why) => {
    const topic = `r-${uid()}`;
    const no = await paidAlipayOrder(topic);
    const sent = await h.alipay.notify(no, ALIPAY, { notifyTime: Date.now() + offset });
    expect(sent).toEqual({ status: 400, text: "fail" });
    expect((await h.payment("alipay", no)).state).toBe("polling");
    expect(h.logs).toContainEqual(
      expect.objectContaining({
        event: "notify_refused",
        provider: "alipay",
        reason: expect.stringMatching(why),
      }),
    );
    expect(await h.outcomes(topic)).toEqual([]);
  });

  it("takes one 24 hours old, as Alipay's last resends are: it is Alipay's word all the same", async () => {
    const topic = `r-${uid()}`;
    const no = await paidAlipayOrder(topic);
    const sent = await h.alipay.notify(no, ALIPAY, { notifyTime: Date.now() - 24 * HOUR });
    expect(sent).toEqual({ status: 200, text: "success" });
    expect((await h.payment("alipay", no)).outcome).toMatchObject({
      event: "payment.paid",
      source: "notify",
    });
  });
});

describe("a notification the watch took before", () => {
  it("Alipay: the same notify_id again is acknowledged (success) and acts no more", async () => {
    const topic = `r-${uid()}`;
    const no = await paidAlipayOrder(topic);
    const notifyId = `2025010100222${uid()}${uid()}`;
    expect(await h.alipay.notify(no, ALIPAY, { notifyId })).toEqual({
      status: 200,
      text: "success",
    });
    const first = await h.payment("alipay", no);
    expect(first.state).toBe("paid");
    const duplicates = () =>
      h.logs.filter((e) => e.event === "notify_duplicate" && e.provider === "alipay").length;
    const before = duplicates();
    // Alipay's resend: the same notification, signed again.
    expect(await h.alipay.notify(no, ALIPAY, { notifyId })).toEqual({
      status: 200,
      text: "success",
    });
    expect(duplicates()).toBe(before + 1);
    expect(await h.payment("alipay", no)).toEqual(first);
    expect((await h.outcomes(topic)).map((o) => o.json.event)).toEqual(["payment.paid"]);
    // Another notification (its own id) is taken as ever: here, with nothing left to change.
    expect(await h.alipay.notify(no, ALIPAY)).toEqual({ status: 200, text: "success" });
    expect(duplicates()).toBe(before + 1);
  });

  it("WeChat Pay: the same event id again is acknowledged (204) and acts no more", async () => {
    const topic = `r-${uid()}`;
    const no = `wn-${uid()}`;
    h.wechat.createTrade(no, { total: 100 });
    await h.call("POST", "/v1/payments", {
      provider: "wechatpay",
      account: "sandbox",
      outTradeNo: no,
      schedule: [3600],
      notify: [topic],
    });
    h.wechat.pay(no);
    const eventId = crypto.randomUUID();
    expect(await h.wechat.notify(no, WECHAT, { eventId })).toMatchObject({ status: 204 });
    const first = await h.payment("wechatpay", no);
    const before = h.logs.filter((e) => e.event === "notify_duplicate").length;
    expect(await h.wechat.notify(no, WECHAT, { eventId })).toMatchObject({ status: 204 });
    expect(h.logs.filter((e) => e.event === "notify_duplicate").length).toBe(before + 1);
    expect(await h.payment("wechatpay", no)).toEqual(first);
    expect((await h.outcomes(topic)).map((o) => o.json.event)).toEqual(["payment.paid"]);
  });

  it("remembers the ids in the watch's hash, the last 16 at most", async () => {
    const topic = `r-${uid()}`;
    const no = await paidAlipayOrder(topic);
    const ids = Array.from({ length: 18 }, (_, n) => `id${String(n).padStart(2, "0")}-${uid()}`);
    for (const notifyId of ids) {
      expect(await h.alipay.notify(no, ALIPAY, { notifyId })).toEqual({
        status: 200,
        text: "success",
      });
    }
    const watchKey = h.key.watch(publicWatchId("alipay", no));
    const kept = String(await h.redis.hget(watchKey, "notified")).split(" ");
    expect(kept).toEqual(ids.slice(2).reverse());
  });
});
