// Auth on every route (from the OpenAPI document), topic-scoped tokens, and token parsing.
import { describe, expect, it } from "vitest";
import { accountAllows } from "../../src/domain/scope";
import { parseTokens, tokenIdOf } from "../../src/http/auth";
import { DelayqError } from "../../src/index";
import { DelayQueue } from "../../src/queue";
import { SHOP_A, type TestApp, testApp } from "../support/app";

type Operation = { method: string; path: string };

async function operations(call: ReturnType<typeof testApp>["call"]): Promise<Operation[]> {
  const doc = (await call("GET", "/openapi.json", { token: null })).json as {
    paths: Record<string, Record<string, unknown>>;
  };
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.keys(methods).map((method) => ({
      method: method.toUpperCase(),
      path: path.replace("{id}", "some-id").replace("{topic}", "some-topic"),
    })),
  );
}

describe("bearer tokens", () => {
  it("refuses every /v1 route without a token or with a wrong one, and touches nothing", async () => {
    const { call, redis, keys } = testApp();
    const routes = (await operations(call)).filter((op) => op.path.startsWith("/v1/"));
    expect(routes.length).toBeGreaterThanOrEqual(15);
    for (const { method, path } of routes) {
      for (const token of [null, "wrong-token", "admin-token-but-longer", ""]) {
        const body = method === "GET" ? undefined : { topic: "some-topic" };
        const res = await call(method, path, { token, body });
        expect(res.status, `${method} ${path} with ${token}`).toBe(401);
        expect(res.json.error.code).toBe("unauthorized");
        expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
      }
    }
    expect(await redis.exists(keys.topics)).toBe(0);
  });

  it("needs no token for /health, /openapi.json and /docs", async () => {
    const { call } = testApp();
    expect((await call("GET", "/health", { token: null })).json).toEqual({
      status: "ok",
      redis: "ok",
    });
    const doc = await call("GET", "/openapi.json", { token: null });
    expect(doc.json.openapi).toBe("3.1.0");
    const docs = await call("GET", "/docs", { token: null });
    expect(docs.json).toMatch(/<title>delayq API<\/title>/);
  });
});

describe("a token scoped to some topics", () => {
  it("cannot read or write another topic's jobs, by topic or by id", async () => {
    const { call } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "shop-b.orders", id: "b-1", body: "secret" } });
    await call("POST", "/v1/topics/shop-b.orders/pop");
    const asShopA = (method: string, path: string, body?: unknown) =>
      call(method, path, { token: SHOP_A, body });

    const denied: [string, string, unknown?][] = [
      ["POST", "/v1/jobs", { topic: "shop-b.orders" }],
      ["POST", "/v1/topics/shop-b.orders/pop"],
      ["POST", "/v1/topics/shop-b.orders/kick"],
      ["DELETE", "/v1/topics/shop-b.orders/dead"],
      ["GET", "/v1/topics/shop-b.orders"],
      ["PUT", "/v1/topics/shop-b.orders", { paused: true }],
      ["GET", "/v1/topics/shop-b.orders/jobs?state=reserved"],
    ];
    for (const [method, path, body] of denied) {
      const res = await asShopA(method, path, body);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.json.error.code).toBe("forbidden");
      expect(JSON.stringify(res.json)).not.toMatch(/secret/);
    }
    // A job of another topic, addressed by id, reads as missing: the status must not tell
    // whether the id exists (issue 8.14).
    const byId: [string, string][] = [
      ["GET", "/v1/jobs/b-1"],
      ["DELETE", "/v1/jobs/b-1"],
      ["POST", "/v1/jobs/b-1/finish"],
      ["POST", "/v1/jobs/b-1/touch"],
      ["POST", "/v1/jobs/b-1/release"],
      ["POST", "/v1/jobs/b-1/bury"],
    ];
    for (const [method, path] of byId) {
      const res = await asShopA(method, path);
      const missing = await asShopA(method, path.replace("b-1", "no-such-id"));
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.json.error.code).toBe("job_not_found");
      expect(missing.status).toBe(404);
      expect(res.json.error.message).toBe(missing.json.error.message.replace("no-such-id", "b-1"));
    }
    const batch = await asShopA("POST", "/v1/jobs/batch", { jobs: [{ topic: "shop-b.x" }] });
    expect(batch.json.results[0].error.code).toBe("forbidden");
    const command = await asShopA("POST", "/v1/command", { command: "get", id: "b-1" });
    expect(command.json).toMatchObject({
      success: false,
      error: expect.stringMatching(/^job_not_found/),
    });

    // The job was not touched by any of it.
    expect((await call("GET", "/v1/jobs/b-1")).json.job).toMatchObject({
      state: "reserved",
      attempts: 1,
    });
  });

  it("works on its own topics and lists only them", async () => {
    const { call } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "shop-b.orders" } });
    const mine = await call("POST", "/v1/jobs", {
      token: SHOP_A,
      body: { topic: "shop-a.orders" },
    });
    expect(mine.status).toBe(201);
    const popped = await call("POST", "/v1/topics/shop-a.orders/pop", { token: SHOP_A });
    expect(popped.json.jobs).toHaveLength(1);
    const topics = await call("GET", "/v1/topics", { token: SHOP_A });
    expect(topics.json.topics.map((t: { topic: string }) => t.topic)).toEqual(["shop-a.orders"]);
  });

  it("pages topics with sealed cursors only, never naming or locating a topic it may not see", async () => {
    const { call } = testApp();
    // "a": a one-character name (a sealed cursor of one once came out too short to open).
    const hidden = ["a", "acme.ledger", "acme.orders", "shop-b.x", "zeta.secret"];
    for (const topic of [...hidden, "shop-a.one", "shop-a.two"]) {
      expect((await call("POST", "/v1/jobs", { body: { topic } })).status).toBe(201);
    }
    const seen: string[] = [];
    const cursors: string[] = [];
    let after: string | undefined;
    for (let page = 0; page < 10; page++) {
      const query = new URLSearchParams({ limit: "1", ...(after ? { after } : {}) });
      const res = await call("GET", `/v1/topics?${query}`, { token: SHOP_A });
      expect(res.status).toBe(200);
      seen.push(...res.json.topics.map((t: { topic: string }) => t.topic));
      after = res.json.cursor;
      if (!after) break;
      cursors.push(after);
    }
    expect(seen).toEqual(["shop-a.one", "shop-a.two"]);
    // Its pattern is a prefix: pages are read within it, so they are its names' alone.
    expect(cursors).toHaveLength(1);
    // Every cursor is sealed, all of one length: none tells a name, nor how long it is.
    for (const cursor of cursors) {
      expect(cursor).toMatch(/^~[A-Za-z0-9_-]+$/);
      expect(cursor).toHaveLength((cursors[0] as string).length);
      for (const name of hidden.slice(1)) {
        expect(cursor).not.toContain(Buffer.from(name).toString("base64url").slice(0, 8));
      }
    }
    // A name as `after` would tell whether the name after it is hidden: refused.
    const probe = await call("GET", "/v1/topics?limit=1&after=acme.o", { token: SHOP_A });
    expect(probe.status).toBe(400);
    expect(probe.json.error.message).toContain("cannot start at a name");
    // The admin's cursors are names, and its `after` any name.
    const admin = await call("GET", "/v1/topics?limit=2");
    expect(admin.json.cursor).toBe("acme.ledger");
    expect((await call("GET", "/v1/topics?limit=1&after=acme.o")).json.topics[0].topic).toBe(
      "acme.orders",
    );
    // A sealed cursor altered, or sealed by another deployment (its own secret), is refused.
    const sealed = cursors[0] as string;
    const flipped = `${sealed.slice(0, 60)}${sealed[60] === "A" ? "B" : "A"}${sealed.slice(61)}`;
    const elsewhere = testApp();
    await elsewhere.call("POST", "/v1/jobs", { body: { topic: "acme.x" } });
    await elsewhere.call("POST", "/v1/jobs", { body: { topic: "shop-a.x" } });
    await elsewhere.call("POST", "/v1/jobs", { body: { topic: "shop-a.y" } });
    const other = (await elsewhere.call("GET", "/v1/topics?limit=1", { token: SHOP_A })).json
      .cursor as string;
    expect(other).toMatch(/^~/);
    for (const bad of [flipped, other, "~tooshort", "~!!"]) {
      const res = await call("GET", `/v1/topics?after=${encodeURIComponent(bad)}`, {
        token: SHOP_A,
      });
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe("invalid_request");
    }
  });
});

describe("the secret that seals cursors", () => {
  it("is read again when a cursor does not open under it: a secret made anew is followed", async () => {
    const a = testApp();
    for (const topic of ["shop-a.one", "shop-a.two"]) {
      await a.call("POST", "/v1/jobs", { body: { topic } });
    }
    const page = (t: TestApp, after?: string) =>
      t.call(
        "GET",
        `/v1/topics?${new URLSearchParams({ limit: "1", ...(after ? { after } : {}) })}`,
        {
          token: SHOP_A,
        },
      );
    expect((await page(a)).json.cursor).toMatch(/^~/);
    // The key is lost (a flush, a failover); another process on the same Redis makes a new one.
    await a.redis.del(a.keys.cursorSecret);
    const b = testApp({
      test: { ...a, queue: new DelayQueue({ redis: a.redis, prefix: a.keys.base.slice(1, -2) }) },
    });
    const fromB = (await page(b)).json.cursor as string;
    // a had the old secret: it reads the new one and goes on from b's cursor.
    const onA = await page(a, fromB);
    expect(onA.status).toBe(200);
    expect(onA.json.topics.map((t: { topic: string }) => t.topic)).toEqual(["shop-a.two"]);
    // And seals under it from then on: b opens a's cursors.
    const fromA = (await page(a)).json.cursor as string;
    expect((await page(b, fromA)).status).toBe(200);
  });
});

describe("DQ_TOKENS parsing", () => {
  it("reads tokens, their topic patterns and their payment accounts", async () => {
    const tokens = parseTokens(
      " admin , shop:shop-a.*|payments , paying:shop-b.*|wechatpay/shop-b|*/shared-*|alipay/b ",
    );
    expect(tokens.size).toBe(3);
    expect(await tokens.identify("admin")).toEqual({
      scope: undefined,
      accounts: undefined,
      tokenId: await tokenIdOf("admin"),
    });
    // A limited token without a provider/account pattern watches no payment account.
    expect(await tokens.identify("shop")).toEqual({
      scope: ["shop-a.*", "payments"],
      accounts: [],
      tokenId: await tokenIdOf("shop"),
    });
    const paying = await tokens.identify("paying");
    expect(paying).toEqual({
      scope: ["shop-b.*"],
      accounts: ["wechatpay/shop-b", "*/shared-*", "alipay/b"],
      tokenId: await tokenIdOf("paying"),
    });
    // Each token is found by its id too (a dashboard session's), with its scope; no other id.
    expect(await tokens.byId(await tokenIdOf("paying"))).toEqual(paying);
    expect(await tokens.byId(await tokenIdOf("nobody"))).toBeUndefined();
    expect(await tokens.byId("")).toBeUndefined();
    const allowed = (provider: string, account: string) =>
      accountAllows(paying?.accounts, provider, account);
    expect(allowed("wechatpay", "shop-b")).toBe(true);
    expect(allowed("alipay", "shop-b")).toBe(false);
    expect(allowed("alipay", "shared-1")).toBe(true);
    expect(allowed("wechatpay", "shared-")).toBe(true);
    expect(allowed("alipay", "b")).toBe(true);
    expect(allowed("alipay", "bb")).toBe(false);
    expect(allowed("wechatpay", "unshared-1")).toBe(false);
    expect(accountAllows(undefined, "alipay", "anything")).toBe(true);
    expect(accountAllows([], "alipay", "anything")).toBe(false);
    expect(await tokens.identify("shop:shop-a.*")).toBeUndefined();
    expect(await tokens.identify("nobody")).toBeUndefined();
  });

  it("answers the same when a token comes again (valid ones are remembered)", async () => {
    const tokens = parseTokens("admin,shop:shop-a.*|payments");
    const asked = ["shop", "admin", "nobody", "shop", "sho", "shopp", "admin ", "nobody", "admin"];
    const answers = [];
    for (let round = 0; round < 3; round++) {
      for (const token of asked) answers.push(await tokens.identify(token));
    }
    const shop = {
      scope: ["shop-a.*", "payments"],
      accounts: [],
      tokenId: await tokenIdOf("shop"),
    };
    const admin = { scope: undefined, accounts: undefined, tokenId: await tokenIdOf("admin") };
    const once = [shop, admin, undefined, shop, undefined, undefined, undefined, undefined, admin];
    expect(answers).toEqual([...once, ...once, ...once]);
  });

  it("names the broken entry by its position, never quoting its text", () => {
    expect(() => parseTokens("good,,other")).toThrow(/DQ_TOKENS: entry 2: has no token/);
    expect(() => parseTokens("secret-value:bad pattern")).toThrow(DelayqError);
    // A scope is no safer to quote than a token: a second token pasted after a colon, say.
    for (const value of ["secret-value:bad pattern", "admin,secret-value:t.*|pasted/tok en"]) {
      try {
        parseTokens(value);
        expect.unreachable();
      } catch (error) {
        expect(String(error)).not.toMatch(/secret-value|bad pattern|pasted|tok en/);
      }
    }
    expect(() => parseTokens("secret-value:bad pattern")).toThrow(
      /^delayq is misconfigured: DQ_TOKENS: entry 1: pattern 1 \(after the token's colon, counting by \|\) is not a valid topic pattern/,
    );
    expect(() => parseTokens("good,ab cd")).toThrow(
      /DQ_TOKENS: entry 2: its token contains a space/,
    );
    for (const pattern of ["paypal/shop", "alipay/", "alipay/a/b", "wechatpay/a b", "/shop"]) {
      expect(() => parseTokens(`admin,secret-value:t.*|${pattern}`)).toThrow(
        /DQ_TOKENS: entry 2: pattern 2 .* is not a valid payment account pattern .*use alipay\/<account>/,
      );
    }
    // Listed twice, a token would act with its first entry's scope alone (the second ignored).
    expect(() => parseTokens("admin,shared:a.*,shared:b.*")).toThrow(
      /DQ_TOKENS: entry 3: repeats the token of entry 2; list each token once, with all its patterns/,
    );
    expect(() => parseTokens("shared-secret,shared-secret")).not.toThrow(/shared-secret/);
  });
});
