// The QStash stand-in, driven by the real @upstash/qstash Client and checked by the real Receiver.
import { createHash, createHmac } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { Client, QstashError, Receiver, SignatureError } from "@upstash/qstash";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  compileRetryDelay,
  parseDuration,
  type QStashStandIn,
  startQStash,
} from "../../dev/qstash";

type Answer = { status?: number; headers?: Record<string, string>; body?: string; hang?: boolean };
type Received = {
  method: string;
  path: string;
  target: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
};
type Destination = Awaited<ReturnType<typeof startDestination>>;

/** A real HTTP server on 127.0.0.1 that records what reaches it and answers per path. */
async function startDestination() {
  const received: Received[] = [];
  const routes = new Map<string, (hit: number) => Answer>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const target = req.url ?? "/";
      const path = target.split("?")[0] ?? "/";
      const hit = received.filter((r) => r.path === path).length;
      received.push({
        method: req.method ?? "",
        path,
        target,
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        at: Date.now(),
      });
      const answer = routes.get(path)?.(hit) ?? {};
      if (answer.hang) return;
      res.writeHead(answer.status ?? 200, answer.headers).end(answer.body ?? "");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: (path: string) => `${base}${path}`,
    on: (path: string, answer: (hit: number) => Answer) => routes.set(path, answer),
    hits: (path: string) => received.filter((r) => r.path === path),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function waitFor<T>(probe: () => T | undefined, what: string, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const header = (r: Received, name: string) => {
  const value = r.headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(", ") : value;
};
const fromBase64 = (text: string) => Buffer.from(text, "base64").toString("utf8");
const decodeJwt = (token: string) => {
  const [h, p, s] = token.split(".");
  return {
    header: JSON.parse(Buffer.from(h ?? "", "base64url").toString("utf8")),
    payload: JSON.parse(Buffer.from(p ?? "", "base64url").toString("utf8")),
    signingInput: `${h}.${p}`,
    signature: s ?? "",
  };
};

let qstash: QStashStandIn;
let dest: Destination;
let client: Client;
let receiver: Receiver;

beforeAll(async () => {
  qstash = await startQStash({ retryDelayMs: () => 50 });
  dest = await startDestination();
  client = new Client({
    baseUrl: qstash.url,
    token: qstash.token,
    devMode: false,
    enableTelemetry: false,
  });
  receiver = new Receiver({
    currentSigningKey: qstash.currentSigningKey,
    nextSigningKey: qstash.nextSigningKey,
    devMode: false,
  });
});

afterAll(async () => {
  await qstash?.close();
  await dest?.close();
});

describe("publish and delivery", () => {
  it("delivers at Not-Before (which wins over Delay) with method, body, headers and query", async () => {
    const notBefore = Math.ceil((Date.now() + 1000) / 1000);
    const url = `${dest.url("/at")}?a=1&b=two`;
    const body = { hello: "wörld", n: 1 };
    const res = await client.publishJSON({
      url,
      body,
      notBefore,
      delay: 30,
      headers: { "X-Custom": "v1", "delayq-id": "job-1" },
    });
    expect(res.messageId).toMatch(/^msg_/);
    expect(res.url).toBe(url);
    expect(qstash.message(res.messageId)?.state).toBe("pending");

    const got = await waitFor(() => dest.hits("/at")[0], "the delivery", 4000);
    expect(got.at).toBeGreaterThanOrEqual(notBefore * 1000);
    expect(got.at).toBeLessThan(notBefore * 1000 + 1000);
    expect(got.method).toBe("POST");
    expect(got.target).toBe("/at?a=1&b=two");
    expect(got.body).toBe(JSON.stringify(body));
    expect(header(got, "content-type")).toBe("application/json");
    expect(header(got, "x-custom")).toBe("v1");
    expect(header(got, "delayq-id")).toBe("job-1");
    expect(header(got, "upstash-message-id")).toBe(res.messageId);
    expect(header(got, "upstash-retried")).toBe("0");
    expect(header(got, "user-agent")).toBe("Upstash-QStash");
    // Nothing of the publish request's own plumbing leaks through.
    expect(Object.keys(got.headers).filter((h) => h.startsWith("upstash-forward"))).toEqual([]);
    expect(got.headers.authorization).toBeUndefined();

    const signature = header(got, "upstash-signature") ?? "";
    await expect(receiver.verify({ signature, body: got.body, url })).resolves.toBe(true);
    await expect(
      receiver.verify({ signature, body: got.body.replace("1", "2"), url }),
    ).rejects.toThrow(SignatureError);
    await expect(
      receiver.verify({ signature, body: got.body, url: dest.url("/elsewhere") }),
    ).rejects.toThrow(SignatureError);

    // The token's shape, checked with node:crypto rather than with the code that made it.
    const jwt = decodeJwt(signature);
    expect(jwt.header).toEqual({ alg: "HS256", typ: "JWT" });
    expect(jwt.payload).toMatchObject({ iss: "Upstash", sub: url });
    expect(jwt.payload.exp - jwt.payload.iat).toBe(300);
    expect(jwt.payload.nbf).toBe(jwt.payload.iat);
    expect(jwt.payload.jti).toMatch(/^jwt_\w+$/);
    const digest = createHash("sha256").update(got.body, "utf8").digest("base64url");
    expect(jwt.payload.body).toBe(`${digest}=`);
    const mac = createHmac("sha256", Buffer.from(qstash.currentSigningKey, "utf8"))
      .update(jwt.signingInput)
      .digest("base64url");
    expect(jwt.signature).toBe(mac);

    await waitFor(
      () => (qstash.message(res.messageId)?.state === "delivered" ? true : undefined),
      "delivered state",
    );
    const record = qstash.deliveries().find((d) => d.messageId === res.messageId);
    expect(record).toMatchObject({ kind: "message", destination: url, status: 200, retried: 0 });
  });

  it("delivers after Upstash-Delay, in seconds from the SDK or milliseconds on the wire", async () => {
    const started = Date.now();
    await client.publishJSON({ url: dest.url("/delay-s"), body: { d: 1 }, delay: 1 });
    const raw = await fetch(`${qstash.url}/v2/publish/${dest.url("/delay-ms")}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${qstash.token}`,
        "content-type": "text/plain",
        "upstash-delay": "300ms",
        "upstash-method": "PUT",
      },
      body: "plain text",
    });
    expect(raw.status).toBe(200);
    const ms = await waitFor(() => dest.hits("/delay-ms")[0], "the 300ms delivery");
    expect(ms.at - started).toBeGreaterThanOrEqual(300);
    expect(ms.method).toBe("PUT");
    expect(ms.body).toBe("plain text");
    expect(header(ms, "content-type")).toBe("text/plain");
    const s = await waitFor(() => dest.hits("/delay-s")[0], "the 1s delivery");
    expect(s.at - started).toBeGreaterThanOrEqual(1000);
    expect(s.at - started).toBeLessThan(2500);
  });

  it("publishes a batch from batchJSON and batch, each message delivered as given", async () => {
    const replies = await client.batchJSON([
      { url: dest.url("/batch-a"), body: { a: 1 }, headers: { "X-Tag": "a" }, method: "PUT" },
      { url: `${dest.url("/batch-b")}?q=1`, body: { b: 2 }, retries: 0 },
    ]);
    expect(replies).toHaveLength(2);
    expect(replies.map((r) => r.url)).toEqual([
      dest.url("/batch-a"),
      `${dest.url("/batch-b")}?q=1`,
    ]);
    expect(new Set(replies.map((r) => r.messageId)).size).toBe(2);
    const a = await waitFor(() => dest.hits("/batch-a")[0], "batch a");
    const b = await waitFor(() => dest.hits("/batch-b")[0], "batch b");
    expect(a).toMatchObject({ method: "PUT", body: JSON.stringify({ a: 1 }) });
    expect(header(a, "x-tag")).toBe("a");
    expect(header(a, "content-type")).toBe("application/json");
    expect(header(a, "upstash-message-id")).toBe(replies[0]?.messageId);
    expect(b).toMatchObject({ method: "POST", target: "/batch-b?q=1", body: '{"b":2}' });
    expect(qstash.message(replies[1]?.messageId ?? "")?.maxRetries).toBe(0);
    const signature = header(b, "upstash-signature") ?? "";
    await expect(
      receiver.verify({ signature, body: b.body, url: `${dest.url("/batch-b")}?q=1` }),
    ).resolves.toBe(true);

    const plain = await client.batch([
      { url: dest.url("/batch-c"), body: "one", headers: { "content-type": "text/plain" } },
    ]);
    expect(plain).toHaveLength(1);
    const c = await waitFor(() => dest.hits("/batch-c")[0], "batch c");
    expect(c.body).toBe("one");
    expect(header(c, "content-type")).toBe("text/plain");
  });

  it("deduplicates by id and by content: 202, the first messageId, one delivery", async () => {
    const first = await client.publishJSON({
      url: dest.url("/dedup"),
      body: { n: 1 },
      deduplicationId: "same-id",
    });
    const second = await client.publishJSON({
      url: dest.url("/dedup"),
      body: { n: 2 },
      deduplicationId: "same-id",
    });
    expect(second).toEqual({
      messageId: first.messageId,
      url: dest.url("/dedup"),
      deduplicated: true,
    });
    const raw = await fetch(`${qstash.url}/v2/publish/${dest.url("/dedup")}`, {
      method: "POST",
      headers: { authorization: `Bearer ${qstash.token}`, "upstash-deduplication-id": "same-id" },
      body: "x",
    });
    expect(raw.status).toBe(202);

    const byContent = { url: dest.url("/dedup-content"), contentBasedDeduplication: true };
    const c1 = await client.publishJSON({ ...byContent, body: { same: true } });
    const c2 = await client.publishJSON({ ...byContent, body: { same: true } });
    const c3 = await client.publishJSON({ ...byContent, body: { same: false } });
    expect(c2.messageId).toBe(c1.messageId);
    expect(c2.deduplicated).toBe(true);
    expect(c3.messageId).not.toBe(c1.messageId);
    expect(c3.deduplicated).toBeUndefined();

    await waitFor(() => dest.hits("/dedup-content")[1], "two content deliveries");
    await sleep(150);
    expect(dest.hits("/dedup")).toHaveLength(1);
    expect(dest.hits("/dedup")[0]?.body).toBe('{"n":1}');
    expect(dest.hits("/dedup-content")).toHaveLength(2);
  });

  it("cancels a pending message, which is then never delivered; unknown ids are 404", async () => {
    const notBefore = Math.ceil((Date.now() + 800) / 1000);
    const { messageId } = await client.publishJSON({
      url: dest.url("/cancelled"),
      body: { x: 1 },
      notBefore,
      label: "to-cancel",
      callback: dest.url("/cancelled-cb"),
    });
    const read = await client.messages.get(messageId);
    expect(read).toMatchObject({
      messageId,
      url: dest.url("/cancelled"),
      method: "POST",
      body: '{"x":1}',
      notBefore: notBefore * 1000,
      callback: dest.url("/cancelled-cb"),
      label: "to-cancel",
      maxRetries: 3,
    });
    expect(read.header?.["content-type"]).toEqual(["application/json"]);

    await expect(client.messages.cancel(messageId)).resolves.toEqual({ cancelled: 1 });
    expect(qstash.message(messageId)?.state).toBe("cancelled");
    await sleep(Math.max(0, notBefore * 1000 - Date.now()) + 300);
    expect(dest.hits("/cancelled")).toEqual([]);
    expect(dest.hits("/cancelled-cb")).toEqual([]);

    const gone = await client.messages.cancel(messageId).catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(QstashError);
    expect((gone as QstashError).status).toBe(404);
    const unknown = await client.messages.get("msg_unknown").catch((e: unknown) => e);
    expect((unknown as QstashError).status).toBe(404);
    const raw = await fetch(`${qstash.url}/v2/messages/msg_unknown`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${qstash.token}` },
    });
    expect(raw.status).toBe(404);
    expect(await raw.json()).toEqual({ error: "message not found" });
  });
});

describe("retries, DLQ and callbacks", () => {
  it("retries a 500 up to Upstash-Retries, then DLQ and a signed failure callback", async () => {
    dest.on("/always-500", () => ({ status: 500, headers: { "x-why": "because" }, body: "boom" }));
    const body = { job: "fails" };
    const { messageId } = await client.publishJSON({
      url: dest.url("/always-500"),
      body,
      retries: 2,
      failureCallback: dest.url("/fail-cb"),
      callback: dest.url("/never-cb"),
      headers: { "X-Source": "s" },
    });
    const cb = await waitFor(() => dest.hits("/fail-cb")[0], "the failure callback");
    const attempts = dest.hits("/always-500");
    expect(attempts.map((a) => header(a, "upstash-retried"))).toEqual(["0", "1", "2"]);
    for (const [i, a] of attempts.entries()) {
      if (i > 0) expect(a.at - (attempts[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(45);
      expect(header(a, "upstash-message-id")).toBe(messageId);
    }

    const callbackUrl = dest.url("/fail-cb");
    const signature = header(cb, "upstash-signature") ?? "";
    await expect(receiver.verify({ signature, body: cb.body, url: callbackUrl })).resolves.toBe(
      true,
    );
    await expect(
      receiver.verify({ signature, body: cb.body, url: dest.url("/always-500") }),
    ).rejects.toThrow(SignatureError);
    expect(cb.method).toBe("POST");
    expect(header(cb, "upstash-message-id")).not.toBe(messageId);
    const payload = JSON.parse(cb.body);
    expect(payload).toMatchObject({
      status: 500,
      retried: 2,
      maxRetries: 2,
      sourceMessageId: messageId,
      url: dest.url("/always-500"),
      method: "POST",
    });
    expect(fromBase64(payload.body)).toBe("boom");
    expect(fromBase64(payload.sourceBody)).toBe(JSON.stringify(body));
    expect(payload.header["x-why"]).toEqual(["because"]);
    expect(payload.sourceHeader["x-source"]).toEqual(["s"]);
    expect(payload.createdAt).toMatch(/^\d+$/);
    expect(payload.notBefore).toMatch(/^\d+$/);
    expect(typeof payload.dlqId).toBe("string");

    const stored = qstash.message(messageId);
    expect(stored).toMatchObject({ state: "failed", dlqId: payload.dlqId, lastStatus: 500 });
    const listed = await client.dlq.listMessages();
    const entry = listed.messages.find((m) => m.dlqId === payload.dlqId);
    expect(entry).toMatchObject({ messageId, url: dest.url("/always-500"), responseStatus: 500 });
    expect(entry?.responseBody).toBe("boom");
    await client.dlq.delete(payload.dlqId);
    const after = await client.dlq.listMessages();
    expect(after.messages.find((m) => m.dlqId === payload.dlqId)).toBeUndefined();
    const missing = await client.dlq.delete(payload.dlqId).catch((e: unknown) => e);
    expect((missing as QstashError).status).toBe(404);
    expect(dest.hits("/never-cb")).toEqual([]);
  });

  it("waits between retries as Upstash-Retry-Delay says", async () => {
    dest.on("/expr", () => ({ status: 502 }));
    const { messageId } = await client.publishJSON({
      url: dest.url("/expr"),
      body: {},
      retries: 2,
      retryDelay: "100 * pow(2, retried)",
    });
    await waitFor(() => (qstash.message(messageId)?.state === "failed" ? true : undefined), "DLQ");
    const at = dest.hits("/expr").map((a) => a.at);
    expect(at).toHaveLength(3);
    expect((at[1] ?? 0) - (at[0] ?? 0)).toBeGreaterThanOrEqual(100);
    expect((at[2] ?? 0) - (at[1] ?? 0)).toBeGreaterThanOrEqual(200);
  });

  it("sends a signed success callback with the destination's answer in base64", async () => {
    dest.on("/ok", () => ({
      status: 201,
      headers: { "x-answer": "yes", "content-type": "application/json" },
      body: '{"done":true}',
    }));
    const { messageId } = await client.publishJSON({
      url: dest.url("/ok"),
      body: { please: "do" },
      callback: dest.url("/ok-cb"),
      failureCallback: dest.url("/ok-fail-cb"),
    });
    const cb = await waitFor(() => dest.hits("/ok-cb")[0], "the callback");
    const signature = header(cb, "upstash-signature") ?? "";
    await expect(
      receiver.verify({ signature, body: cb.body, url: dest.url("/ok-cb") }),
    ).resolves.toBe(true);
    expect(header(cb, "content-type")).toBe("application/json");
    const payload = JSON.parse(cb.body);
    expect(payload).toMatchObject({
      status: 201,
      retried: 0,
      maxRetries: 3,
      sourceMessageId: messageId,
      url: dest.url("/ok"),
      method: "POST",
    });
    expect(fromBase64(payload.body)).toBe('{"done":true}');
    expect(fromBase64(payload.sourceBody)).toBe('{"please":"do"}');
    expect(payload.header["x-answer"]).toEqual(["yes"]);
    expect(payload.dlqId).toBeUndefined();
    expect(Number(payload.createdAt)).toBeLessThanOrEqual(Date.now());
    expect(qstash.message(messageId)?.state).toBe("delivered");
    const record = qstash.deliveries().find((d) => d.sourceMessageId === messageId);
    expect(record).toMatchObject({
      kind: "callback",
      destination: dest.url("/ok-cb"),
      status: 200,
    });
    expect(dest.hits("/ok-fail-cb")).toEqual([]);
  });

  it("honours the destination's Retry-After over its own backoff", async () => {
    dest.on("/busy", (hit) =>
      hit === 0 ? { status: 503, headers: { "retry-after": "1" } } : { status: 200 },
    );
    const { messageId } = await client.publishJSON({ url: dest.url("/busy"), body: {} });
    const second = await waitFor(() => dest.hits("/busy")[1], "the retry", 4000);
    const first = dest.hits("/busy")[0];
    expect(second.at - (first?.at ?? 0)).toBeGreaterThanOrEqual(1000);
    expect(header(second, "upstash-retried")).toBe("1");
    await waitFor(
      () => (qstash.message(messageId)?.state === "delivered" ? true : undefined),
      "delivered",
    );
  });

  it("sends a 489 with Upstash-NonRetryable-Error straight to the DLQ, a bare 489 is retried", async () => {
    dest.on("/fatal", () => ({ status: 489, headers: { "upstash-nonretryable-error": "true" } }));
    dest.on("/bare-489", () => ({ status: 489 }));
    const fatal = await client.publishJSON({
      url: dest.url("/fatal"),
      body: {},
      retries: 3,
      failureCallback: dest.url("/fatal-cb"),
    });
    const bare = await client.publishJSON({ url: dest.url("/bare-489"), body: {}, retries: 1 });
    const cb = await waitFor(() => dest.hits("/fatal-cb")[0], "the failure callback");
    expect(JSON.parse(cb.body)).toMatchObject({ status: 489, retried: 0, maxRetries: 3 });
    await waitFor(
      () => (qstash.message(bare.messageId)?.state === "failed" ? true : undefined),
      "",
    );
    await sleep(150);
    expect(dest.hits("/fatal")).toHaveLength(1);
    expect(qstash.message(fatal.messageId)?.state).toBe("failed");
    expect(dest.hits("/bare-489")).toHaveLength(2);
  });

  it("gives up on an attempt after Upstash-Timeout", async () => {
    dest.on("/slow", () => ({ hang: true }));
    const started = Date.now();
    const { messageId } = await client.publishJSON({
      url: dest.url("/slow"),
      body: {},
      timeout: 1,
      retries: 0,
      failureCallback: dest.url("/slow-cb"),
    });
    const cb = await waitFor(() => dest.hits("/slow-cb")[0], "the failure callback");
    expect(cb.at - started).toBeGreaterThanOrEqual(1000);
    expect(JSON.parse(cb.body)).toMatchObject({ status: 0, sourceMessageId: messageId });
    const record = qstash.deliveries().find((d) => d.messageId === messageId);
    expect(record).toMatchObject({ status: null, error: "timeout" });
  });
});

describe("auth, keys and bad input", () => {
  it("refuses a wrong or missing token: the SDK throws a 401 QstashError", async () => {
    const wrong = new Client({
      baseUrl: qstash.url,
      token: `${qstash.token}x`,
      devMode: false,
      enableTelemetry: false,
    });
    const error = await wrong.publishJSON({ url: dest.url("/nope"), body: {} }).catch((e) => e);
    expect(error).toBeInstanceOf(QstashError);
    expect((error as QstashError).status).toBe(401);
    const raw = await fetch(`${qstash.url}/v2/publish/${dest.url("/nope")}`, { method: "POST" });
    expect(raw.status).toBe(401);
    expect(await raw.json()).toEqual({ error: "Unauthorized" });
    await sleep(100);
    expect(dest.hits("/nope")).toEqual([]);
  });

  it("signs with the current key: a Receiver falls back to its next key after a rotation", async () => {
    const { messageId } = await client.publishJSON({ url: dest.url("/keys"), body: { k: 1 } });
    const got = await waitFor(() => dest.hits("/keys")[0], "the delivery");
    const signature = header(got, "upstash-signature") ?? "";
    const url = dest.url("/keys");
    expect(header(got, "upstash-message-id")).toBe(messageId);
    const rotated = new Receiver({
      currentSigningKey: "sig_notTheKeyAnyMore",
      nextSigningKey: qstash.currentSigningKey,
    });
    await expect(rotated.verify({ signature, body: got.body, url })).resolves.toBe(true);
    const nextOnly = new Receiver({
      currentSigningKey: qstash.nextSigningKey,
      nextSigningKey: qstash.nextSigningKey,
    });
    await expect(nextOnly.verify({ signature, body: got.body, url })).rejects.toThrow(
      SignatureError,
    );
    // Without the `sig_` prefix the key is a different key.
    const unprefixed = qstash.currentSigningKey.replace(/^sig_/, "");
    const bare = new Receiver({ currentSigningKey: unprefixed, nextSigningKey: unprefixed });
    await expect(bare.verify({ signature, body: got.body, url })).rejects.toThrow(SignatureError);

    // QStash after a rotation: the old next key signs, and the old current one is next.
    const after = await startQStash({
      currentSigningKey: qstash.nextSigningKey,
      nextSigningKey: "sig_brandNewNextKey",
    });
    try {
      const c = new Client({
        baseUrl: after.url,
        token: after.token,
        devMode: false,
        enableTelemetry: false,
      });
      await c.publishJSON({ url: dest.url("/rotated"), body: { r: 1 } });
      const r = await waitFor(() => dest.hits("/rotated")[0], "the rotated delivery");
      const sig = header(r, "upstash-signature") ?? "";
      await expect(
        receiver.verify({ signature: sig, body: r.body, url: dest.url("/rotated") }),
      ).resolves.toBe(true);
      const stale = new Receiver({
        currentSigningKey: qstash.currentSigningKey,
        nextSigningKey: qstash.currentSigningKey,
      });
      await expect(
        stale.verify({ signature: sig, body: r.body, url: dest.url("/rotated") }),
      ).rejects.toThrow(SignatureError);
    } finally {
      await after.close();
    }
  });

  it("answers bad publishes with a 400 JSON error that says what is wrong", async () => {
    const publish = (destination: string, headers: Record<string, string>) =>
      fetch(`${qstash.url}/v2/publish/${destination}`, {
        method: "POST",
        headers: { authorization: `Bearer ${qstash.token}`, ...headers },
        body: "{}",
      });
    const cases: [string, Record<string, string>, RegExp][] = [
      ["not-a-url", {}, /destination/],
      ["ftp://127.0.0.1/x", {}, /destination/],
      [dest.url("/bad"), { "upstash-not-before": String(Date.now()) }, /unix seconds/],
      [dest.url("/bad"), { "upstash-not-before": "soon" }, /Not-Before/],
      [dest.url("/bad"), { "upstash-delay": "10" }, /Upstash-Delay/],
      [dest.url("/bad"), { "upstash-retries": "-1" }, /Upstash-Retries/],
      [dest.url("/bad"), { "upstash-retry-delay": "pow(2, retried" }, /Retry-Delay/],
      [dest.url("/bad"), { "upstash-retry-delay": "evil(1)" }, /unknown name/],
      [dest.url("/bad"), { "upstash-timeout": "forever" }, /Upstash-Timeout/],
      [dest.url("/bad"), { "upstash-method": "TRACE" }, /Upstash-Method/],
      [dest.url("/bad"), { "upstash-callback": "nowhere" }, /Upstash-Callback/],
    ];
    for (const [destination, headers, message] of cases) {
      const res = await publish(destination, headers);
      expect(res.status, JSON.stringify(headers)).toBe(400);
      const json = (await res.json()) as { error: string };
      expect(json.error).toMatch(message);
    }
    const sdk = await client
      .publishJSON({ url: dest.url("/bad"), body: {}, retryDelay: "1000 +" })
      .catch((e) => e);
    expect((sdk as QstashError).status).toBe(400);

    const batch = await fetch(`${qstash.url}/v2/batch`, {
      method: "POST",
      headers: { authorization: `Bearer ${qstash.token}`, "content-type": "application/json" },
      body: JSON.stringify([
        { destination: dest.url("/bad-batch"), headers: {}, body: "a" },
        { destination: "nowhere", headers: {}, body: "b" },
      ]),
    });
    expect(batch.status).toBe(400);
    await sleep(100);
    expect(dest.hits("/bad")).toEqual([]);
    expect(dest.hits("/bad-batch")).toEqual([]);
  });

  it("accepts a percent-encoded destination as the same URL", async () => {
    const target = dest.url("/encoded");
    const res = await fetch(`${qstash.url}/v2/publish/${encodeURIComponent(target)}`, {
      method: "POST",
      headers: { authorization: `Bearer ${qstash.token}` },
      body: "e",
    });
    expect(((await res.json()) as { url: string }).url).toBe(target);
    const got = await waitFor(() => dest.hits("/encoded")[0], "the delivery");
    expect(got.body).toBe("e");
  });
});

describe("parsers", () => {
  it("reads durations in ms, s, m, h and d", () => {
    expect(parseDuration("100ms")).toBe(100);
    expect(parseDuration("30s")).toBe(30_000);
    expect(parseDuration("5m")).toBe(300_000);
    expect(parseDuration("2h")).toBe(7_200_000);
    expect(parseDuration("1d")).toBe(86_400_000);
    expect(parseDuration("1h30m")).toBe(5_400_000);
    for (const bad of ["", "10", "s", "1y", "-1s", "1 s"])
      expect(parseDuration(bad)).toBeUndefined();
  });

  it("evaluates retry-delay expressions with retried, clamped to a day", () => {
    expect(compileRetryDelay("pow(2, retried) * 1000")(3)).toBe(8000);
    expect(compileRetryDelay("1000 * (1 + retried)")(2)).toBe(3000);
    expect(compileRetryDelay("max(1000, pow(2, retried))")(0)).toBe(1000);
    expect(
      compileRetryDelay("min(5, 7, 3) + abs(-2) + floor(1.7) + ceil(0.2) + round(0.5)")(0),
    ).toBe(8);
    expect(compileRetryDelay("sqrt(16) - exp(0) + 10 % 4 / 2")(0)).toBe(4);
    expect(compileRetryDelay("-5")(0)).toBe(0);
    expect(compileRetryDelay("pow(10, 20)")(0)).toBe(86_400_000);
    for (const bad of ["", "1 +", "pow(2)", "retried;", "foo(1)", "(1", "process.exit()"]) {
      expect(() => compileRetryDelay(bad), bad).toThrow();
    }
  });
});

describe("close", () => {
  it("stops a stand-in with pending and in-flight messages, and nothing is delivered after", async () => {
    const q = await startQStash();
    const c = new Client({
      baseUrl: q.url,
      token: q.token,
      devMode: false,
      enableTelemetry: false,
    });
    dest.on("/close-hang", () => ({ hang: true }));
    await c.publishJSON({ url: dest.url("/close-hang"), body: {} });
    await c.publishJSON({ url: dest.url("/close-later"), body: {}, delay: 1 });
    await waitFor(() => dest.hits("/close-hang")[0], "the hanging attempt");
    const started = Date.now();
    await q.close();
    expect(Date.now() - started).toBeLessThan(1000);
    await expect(fetch(`${q.url}/v2/dlq`)).rejects.toThrow();
    await sleep(1200);
    expect(dest.hits("/close-later")).toEqual([]);
  });
});
