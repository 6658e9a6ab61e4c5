// The payment watches' listing, as the dashboard's panel shows it: the service as buildService
// wires it (the real bridge, real Redis, the Alipay sandbox), on a prefix of its own so that the
// listing holds this file's watches alone.
import type { Redis } from "@upstash/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AlipaySandbox, startAlipaySandbox } from "../../dev/alipay-sandbox";
import { keys } from "../../src/redis/keys";
import type { Service } from "../../src/service";
import { bridgeService } from "../support/service";
import { postWatch } from "./support";

let alipay: AlipaySandbox;
let service: Service;
let redis: Redis;
let prefix: string;
const TOKEN = "list-admin";
const SHOP = "list-shop";
/** The topics of SHOP, but none of the payment accounts. */
const NO_ACCOUNTS = "list-no-accounts";

beforeAll(async () => {
  alipay = await startAlipaySandbox();
  ({ service, redis, prefix } = bridgeService("plist", {
    DQ_TOKENS: `${TOKEN},${SHOP}:shop.*|alipay/sandbox,${NO_ACCOUNTS}:shop.*`,
    DQ_ALIPAY_ACCOUNTS: JSON.stringify({ sandbox: alipay.account }),
  }));
}, 30_000);

afterAll(async () => {
  await alipay?.close();
});

async function watch(outTradeNo: string, notify: string[]) {
  // An hour between polls: nothing polls while the test runs.
  const res = await postWatch(service.app, TOKEN, {
    provider: "alipay",
    account: "sandbox",
    outTradeNo,
    notify,
    schedule: [3600],
  });
  expect(res.status).toBe(201);
  // Watches started in the same ms are listed by id: a ms apart, the order is the start order.
  await new Promise((resolve) => setTimeout(resolve, 3));
}

async function dashboardPage(token: string, path: string) {
  const login = await service.app.request("/dashboard/login", {
    method: "POST",
    body: new URLSearchParams({ token }),
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] as string;
  const res = await service.app.request(path, {
    headers: { cookie, "sec-fetch-site": "same-origin" },
  });
  return { status: res.status, html: await res.text() };
}

describe("listing payment watches", () => {
  it("pages them newest first, each once; a scoped token sees its own; a gone one leaves the index", async () => {
    const orders = ["l-1", "l-2", "l-3", "l-4", "l-5"];
    for (const [i, no] of orders.entries()) await watch(no, [i % 2 ? "shop.paid" : "billing"]);
    const { payments } = service;
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await payments.list({
        limit: 2,
        scope: undefined,
        accounts: undefined,
        ...(cursor ? { cursor } : {}),
      });
      expect(page.watches.length).toBeLessThanOrEqual(2);
      seen.push(...page.watches.map((w) => w.outTradeNo));
      cursor = page.cursor;
    } while (cursor);
    expect(seen).toEqual([...orders].reverse());

    const scoped = await payments.list({ limit: 50, scope: ["shop.*"], accounts: ["*/sandbox"] });
    expect(scoped.watches.map((w) => w.outTradeNo)).toEqual(["l-4", "l-2"]);
    // The same topics without the account: none of them.
    for (const accounts of [[], ["wechatpay/sandbox"], ["alipay/sandbox-2"]]) {
      expect((await payments.list({ limit: 50, scope: ["shop.*"], accounts })).watches).toEqual([]);
    }

    // A watch whose retention ran out: its hash is gone; the listing skips it and drops it.
    const k = keys(prefix);
    const ids = (await redis.zrange(k.watches, 0, -1)) as string[];
    expect(ids).toHaveLength(5);
    await redis.del(k.watch(ids[0] as string));
    const after = await payments.list({ limit: 50, scope: undefined, accounts: undefined });
    expect(after.watches).toHaveLength(4);
    expect(await redis.zcard(k.watches)).toBe(4);

    await expect(
      payments.list({ limit: 5, scope: undefined, accounts: undefined, cursor: "junk" }),
    ).rejects.toThrow(/cursor: not one this listing gave/);
  });

  it("keeps its index bounded without a listing: each start sweeps two entries on", async () => {
    const k = keys(prefix);
    const stale = ["s-1", "s-2", "s-3", "s-4"];
    for (const no of stale) await watch(no, ["billing"]);
    const before = (await redis.zrange(k.watches, 0, -1)) as string[];
    const staleIds = before.slice(-stale.length);
    for (const id of staleIds) await redis.del(k.watch(id));
    // Every entry is looked at within (entries / 2) starts, round and round.
    for (let i = 0; i < Math.ceil(before.length / 2) + 1; i++) await watch(`t-${i}`, ["billing"]);
    const after = (await redis.zrange(k.watches, 0, -1)) as string[];
    expect(after.filter((id) => staleIds.includes(id))).toEqual([]);
    for (const id of after) expect(await redis.exists(k.watch(id))).toBe(1);
  });

  it("shows on the dashboard's panel, with the session's scope", async () => {
    await watch("dash-1", ["shop.orders"]);
    const admin = await dashboardPage(TOKEN, "/dashboard/payments");
    expect(admin.status).toBe(200);
    expect(admin.html).not.toContain('id="no-watches"');
    expect(admin.html).toMatch(
      /<td class="mono">dash-1<\/td>\s*<td><span class="badge">polling<\/span>/,
    );
    expect(admin.html).toContain("l-3");
    const shop = await dashboardPage(SHOP, "/dashboard/payments");
    expect(shop.html).toContain("dash-1");
    expect(shop.html).not.toContain("l-3");
    const noAccounts = await dashboardPage(NO_ACCOUNTS, "/dashboard/payments");
    expect(noAccounts.status).toBe(200);
    expect(noAccounts.html).not.toContain("dash-1");
    const junk = await dashboardPage(TOKEN, "/dashboard/payments?cursor=junk");
    expect(junk.status).toBe(400);
    expect(junk.html).toContain("not one this listing gave");
  });

  it("gives a limited session sealed cursors only: a page's cursor is the last watch read, maybe another account's", async () => {
    for (let i = 0; i < 50; i++) await watch(`hidden-${i}`, ["billing"]);
    await watch("late", ["shop.late"]);
    const nextOf = (html: string) => {
      const href = /href="\/dashboard\/payments\?cursor=([^"]+)"/.exec(html)?.[1];
      return href === undefined ? undefined : decodeURIComponent(href.replaceAll("&amp;", "&"));
    };
    const admin = nextOf((await dashboardPage(TOKEN, "/dashboard/payments")).html);
    expect(admin).toMatch(/^\d+\|[a-z2-7]{26}$/);
    const first = await dashboardPage(SHOP, "/dashboard/payments");
    expect(first.html).toContain("late");
    expect(first.html).not.toContain("hidden-");
    const sealed = nextOf(first.html);
    expect(sealed).toMatch(/^~[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain(admin?.split("|")[1] as string);
    // The sealed link goes on to the session's older watches.
    const second = await dashboardPage(SHOP, `/dashboard/payments?cursor=${sealed}`);
    expect(second.status).toBe(200);
    expect(second.html).toContain("dash-1");
    // A position of its own choosing, or a topic page's sealed cursor, is refused.
    for (const cursor of [admin as string, `${Date.now()}|${"a".repeat(26)}`]) {
      const raw = await dashboardPage(
        SHOP,
        `/dashboard/payments?${new URLSearchParams({ cursor })}`,
      );
      expect(raw.status).toBe(400);
      expect(raw.html).toContain("pages with the cursors it was given");
    }
    const api = (method: string, path: string, body?: unknown) =>
      service.app.request(path, {
        method,
        headers: { authorization: `Bearer ${SHOP}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    for (const topic of ["shop.a", "shop.b"]) await api("POST", "/v1/jobs", { topic, delay: 60 });
    const topics = await api("GET", "/v1/topics?limit=1");
    const topicCursor = ((await topics.json()) as { cursor?: string }).cursor;
    expect(topicCursor).toMatch(/^~/);
    const crossed = await dashboardPage(
      SHOP,
      `/dashboard/payments?${new URLSearchParams({ cursor: topicCursor as string })}`,
    );
    expect(crossed.status).toBe(400);
    expect(crossed.html).toContain("not a cursor this deployment gave");
  });
});
