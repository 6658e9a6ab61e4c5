// The routes anyone may call without a token (the providers' notifications, QStash's callback)
// read no more of a body than such a request can be: 413 payload_too_large, from Content-Length
// before anything is read, else as soon as a streamed body passes the limit, which is then not
// read on. (A security pass pushed 1 GiB into /v1/notify/wechatpay and the process to 2.25 GB.)
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlipaySandbox, startAlipaySandbox } from "../../dev/alipay-sandbox";
import { startWechatPaySandbox, type WechatPaySandbox } from "../../dev/wechatpay-sandbox";
import { OPENAPI_FILE } from "../../dev/write-openapi";
import { MAX_NOTIFICATION_BYTES } from "../../src/http/routes/payments";
import type { Service } from "../../src/service";
import { bridgeService } from "../support/service";

let alipay: AlipaySandbox;
let wechat: WechatPaySandbox;
let service: Service;

beforeAll(async () => {
  alipay = await startAlipaySandbox();
  wechat = await startWechatPaySandbox();
  ({ service } = bridgeService("limits", {
    DQ_TOKENS: "limits-admin",
    DQ_ALIPAY_ACCOUNTS: JSON.stringify({ sandbox: alipay.account }),
    DQ_WECHATPAY_ACCOUNTS: JSON.stringify({ sandbox: wechat.account }),
    QSTASH_URL: "http://127.0.0.1:9",
    QSTASH_TOKEN: "qstash-token",
    QSTASH_CURRENT_SIGNING_KEY: "sig_current",
    QSTASH_NEXT_SIGNING_KEY: "sig_next",
    DQ_PUBLIC_URL: "https://delayq.test",
  }));
}, 30_000);

afterAll(async () => {
  await alipay?.close();
  await wechat?.close();
});

/** A body of `chunks` chunks of 16 KiB with no Content-Length; counts the chunks read. */
function streamed(chunks: number) {
  let pulled = 0;
  const chunk = new TextEncoder().encode("a".repeat(16 * 1024));
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulled === chunks) return controller.close();
      pulled += 1;
      controller.enqueue(chunk);
    },
  });
  return { body, pulled: () => pulled };
}

const ROUTES = [
  ["/v1/notify/alipay/sandbox", MAX_NOTIFICATION_BYTES],
  ["/v1/notify/wechatpay/sandbox", MAX_NOTIFICATION_BYTES],
  ["/v1/qstash/callback?id=x&receipt=y", 1024 * 1024],
] as const;

describe("bodies of routes without a token", () => {
  it.each(ROUTES)("%s stops reading a streamed body past its limit", async (path, limit) => {
    const sent = streamed(1000); // 16 MiB on offer
    const res = await service.app.request(`http://delayq.test${path}`, {
      method: "POST",
      body: sent.body,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error.code).toBe("payload_too_large");
    // Read up to the limit and one chunk past it, plus what the stream had queued: no more.
    expect(sent.pulled() * 16 * 1024).toBeLessThanOrEqual(limit + 3 * 16 * 1024);
  });

  it.each(ROUTES)(
    "%s refuses a declared Content-Length over its limit unread",
    async (path, limit) => {
      const sent = streamed(Math.ceil((limit + 1) / (16 * 1024)));
      const res = await service.app.request(`http://delayq.test${path}`, {
        method: "POST",
        headers: { "content-length": String(limit + 1) },
        body: sent.body,
        duplex: "half",
      } as RequestInit);
      expect(res.status).toBe(413);
      expect(sent.pulled()).toBeLessThanOrEqual(1);
    },
  );

  it("still reads a notification of ordinary size (refused for its signature, not its size)", async () => {
    const res = await service.app.request("http://delayq.test/v1/notify/alipay/sandbox", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: `out_trade_no=o-1&trade_status=TRADE_SUCCESS&sign=${"x".repeat(40 * 1024)}`,
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toBe("fail");
  });
});

describe("the statuses these routes answer are the ones openapi.json lists", () => {
  const doc = JSON.parse(readFileSync(OPENAPI_FILE, "utf8")) as {
    paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
  };
  const listed = (path: string, method: string) =>
    Object.keys(doc.paths[path]?.[method]?.responses ?? {});
  const send = (path: string, init: RequestInit = {}) =>
    service.app.request(`http://delayq.test${path}`, { method: "POST", ...init });
  const big = "x".repeat(MAX_NOTIFICATION_BYTES + 1);

  it("POST /v1/notify/alipay/{account}", async () => {
    const answered = [
      (await send("/v1/notify/alipay/nobody", { body: "a=b" })).status,
      (await send("/v1/notify/alipay/sandbox", { body: "out_trade_no=o-1&sign=x" })).status,
      (await send("/v1/notify/alipay/sandbox", { body: big })).status,
    ];
    expect(answered).toEqual([400, 400, 413]);
    expect(listed("/v1/notify/alipay/{account}", "post")).toEqual(
      expect.arrayContaining(["200", ...answered.map(String)]),
    );
  });

  it("POST /v1/notify/wechatpay/{account}", async () => {
    const answered = [
      (await send("/v1/notify/wechatpay/nobody", { body: "{}" })).status,
      (await send("/v1/notify/wechatpay/sandbox", { body: "{}" })).status,
      (await send("/v1/notify/wechatpay/sandbox", { body: big })).status,
    ];
    expect(answered).toEqual([401, 401, 413]);
    expect(listed("/v1/notify/wechatpay/{account}", "post")).toEqual(
      expect.arrayContaining(["204", ...answered.map(String)]),
    );
  });

  it("GET /metrics", async () => {
    const refused = await service.app.request("http://delayq.test/metrics");
    const read = await service.app.request("http://delayq.test/metrics", {
      headers: { authorization: "Bearer limits-admin" },
    });
    expect([refused.status, read.status]).toEqual([401, 200]);
    const ok = doc.paths["/metrics"]?.get?.responses["200"] as
      | { content?: Record<string, unknown> }
      | undefined;
    expect(Object.keys(ok?.content ?? {})).toEqual([read.headers.get("content-type")]);
    expect(listed("/metrics", "get")).toEqual(expect.arrayContaining(["200", "401"]));
  });
});
