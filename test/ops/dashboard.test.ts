// The dashboard through the real app and Redis, request by request: sign-in and its cookie, CSRF,
// confirmation, escaping of job bodies, topic-scoped tokens, paging, pause/resume, payment watches.
import { describe, expect, it } from "vitest";
import { RawJson } from "../../src/domain/raw-json";
import { parseTokens } from "../../src/http/auth";
import type { PaymentWatchSource, RefundWatchSource } from "../../src/http/pages/payments";
import { ADMIN, SHOP_A, type TestApp, testApp } from "../support/app";

type Page = { status: number; html: string; location: string | null; headers: Headers };

async function send(t: TestApp, path: string, init: RequestInit = {}): Promise<Page> {
  const res = await t.app.request(path, { redirect: "manual", ...init });
  return {
    status: res.status,
    html: await res.text(),
    location: res.headers.get("location"),
    headers: res.headers,
  };
}

/** Signs in; answers the Cookie header to send afterwards. */
async function login(t: TestApp, token = ADMIN): Promise<string> {
  const res = await send(t, "/dashboard/login", {
    method: "POST",
    body: new URLSearchParams({ token }),
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  expect(res.status).toBe(303);
  const cookie = res.headers.get("set-cookie") ?? "";
  expect(cookie).toMatch(/^delayq_dashboard=/);
  return cookie.split(";")[0] as string;
}

const get = (t: TestApp, cookie: string, path: string) =>
  send(t, path, { headers: { cookie, "sec-fetch-site": "same-origin" } });

function csrfOf(html: string): string {
  const match = /name="csrf" value="([0-9a-f]{64})"/.exec(html);
  if (!match?.[1]) throw new Error("no csrf field on the page");
  return match[1];
}

function post(
  t: TestApp,
  cookie: string,
  form: Record<string, string>,
  headers: Record<string, string> = { "sec-fetch-site": "same-origin" },
) {
  return send(t, "/dashboard/actions", {
    method: "POST",
    body: new URLSearchParams(form),
    headers: { cookie, "content-type": "application/x-www-form-urlencoded", ...headers },
  });
}

/** A dead job: added, popped and buried through the API. */
async function deadJob(t: TestApp, topic: string, id: string, body: unknown = { n: 1 }) {
  await t.call("POST", "/v1/jobs", { body: { topic, id, body } });
  await t.call("POST", `/v1/topics/${topic}/pop`, { body: {} });
  const buried = await t.call("POST", `/v1/jobs/${id}/bury`, { body: {} });
  expect(buried.json.job.state).toBe("dead");
}

describe("signing in", () => {
  it("sends a visitor without a session to the sign-in form, and refuses a wrong token", async () => {
    const t = testApp();
    const first = await send(t, "/dashboard");
    expect(first.status).toBe(303);
    expect(first.location).toBe("/dashboard/login");
    const form = await send(t, "/dashboard/login");
    expect(form.html).toContain('<input type="password" id="token" name="token"');
    const wrong = await send(t, "/dashboard/login", {
      method: "POST",
      body: new URLSearchParams({ token: `${ADMIN}-nope` }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(wrong.status).toBe(401);
    expect(wrong.html).toContain("That token is not valid");
    expect(wrong.headers.get("set-cookie")).toBeNull();
    // A forged session cookie is no session.
    const forged = await get(t, "delayq_dashboard=guess", "/dashboard");
    expect(forged.location).toBe("/dashboard/login");
    // HEAD runs the GET route: the same redirect, not the 401 a stale form post gets.
    const head = await send(t, "/dashboard/topics/t1", { method: "HEAD" });
    expect(head.status).toBe(303);
    expect(head.location).toBe("/dashboard/login");
  });

  it("refuses a form whose body is not the multipart its Content-Type says: 400, nothing logged", async () => {
    const t = testApp();
    const cookie = await login(t);
    for (const path of ["/dashboard/login", "/dashboard/logout", "/dashboard/actions"]) {
      const res = await t.app.request(path, {
        method: "POST",
        headers: {
          "content-type": "multipart/form-data; boundary=x",
          cookie,
          "sec-fetch-site": "same-origin",
        },
        body: "token=abc",
      });
      expect(res.status, path).toBe(400);
      // A page like every other dashboard answer (the sign-in form or the error page), not JSON.
      expect(res.headers.get("content-type"), path).toMatch(/^text\/html/);
      expect(await res.text(), path).toContain("could not be read");
    }
    expect(t.logs).toEqual([]);
  });

  it("keeps the token in an HttpOnly, SameSite=Strict cookie, never in a URL", async () => {
    const t = testApp();
    const res = await send(t, "/dashboard/login", {
      method: "POST",
      body: new URLSearchParams({ token: ADMIN }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(res.location).toBe("/dashboard");
    const cookie = res.headers.get("set-cookie") ?? "";
    expect(cookie).toContain("HttpOnly");
    expect(cookie).toContain("SameSite=Strict");
    expect(cookie).toContain("Path=/dashboard");
    expect(cookie).not.toContain("Secure"); // plain http in the dev stack
    const https = await t.app.request("https://delayq.example/dashboard/login", {
      method: "POST",
      body: new URLSearchParams({ token: ADMIN }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(https.headers.get("set-cookie")).toContain("Secure");
    const page = await get(t, cookie.split(";")[0] as string, "/dashboard");
    expect(page.status).toBe(200);
    expect(page.html).not.toContain(ADMIN);
    expect(page.html).not.toMatch(/[?&]token=/);
  });

  it("refuses a sign-in posted from another site", async () => {
    const t = testApp();
    const res = await send(t, "/dashboard/login", {
      method: "POST",
      body: new URLSearchParams({ token: ADMIN }),
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        "sec-fetch-site": "cross-site",
      },
    });
    expect(res.status).toBe(403);
    expect(res.headers.get("set-cookie")).toBeNull();
  });

  it("signs out: the cookie is cleared", async () => {
    const t = testApp();
    const cookie = await login(t);
    const page = await get(t, cookie, "/dashboard");
    const out = await send(t, "/dashboard/logout", {
      method: "POST",
      body: new URLSearchParams({ csrf: csrfOf(page.html) }),
      headers: { cookie, "content-type": "application/x-www-form-urlencoded" },
    });
    expect(out.location).toBe("/dashboard/login");
    expect(out.headers.get("set-cookie")).toMatch(/delayq_dashboard=;.*Max-Age=0/);
  });
});

describe("sessions", () => {
  /** Every key of the app's prefix, and every string value, as one text. */
  async function keyspace(t: TestApp): Promise<string> {
    const found = await t.redis.keys(`${t.keys.base}*`);
    const values = await Promise.all(
      found.map(async (key) => ((await t.redis.type(key)) === "string" ? t.redis.get(key) : "")),
    );
    return JSON.stringify([found, values]);
  }

  it("are an opaque id of their own in the cookie, lasting 12 h, and Redis holds neither it nor the token", async () => {
    const t = testApp();
    const res = await send(t, "/dashboard/login", {
      method: "POST",
      body: new URLSearchParams({ token: ADMIN }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    const header = res.headers.get("set-cookie") ?? "";
    expect(header).toMatch(/Max-Age=43200/);
    const id = /^delayq_dashboard=([^;]*)/.exec(header)?.[1] as string;
    expect(id).toMatch(/^[A-Za-z0-9_-]{43}$/); // 256 random bits
    expect(id).not.toContain(ADMIN);
    // Another sign-in with the same token is another session.
    expect(await login(t)).not.toBe(`delayq_dashboard=${id}`);
    const stored = await keyspace(t);
    expect(stored).not.toContain(id);
    expect(stored).not.toContain(ADMIN);
    // Redis expires it: a key of the session's lifetime.
    const [key] = await t.redis.keys(`${t.keys.base}session:*`);
    const left = await t.redis.pttl(key as string);
    expect(left).toBeGreaterThan(43_100_000);
    expect(left).toBeLessThanOrEqual(43_200_000);
    // The token itself in the cookie is no session (it was, before sessions of their own).
    expect((await get(t, `delayq_dashboard=${ADMIN}`, "/dashboard")).location).toBe(
      "/dashboard/login",
    );
  });

  it("last DQ_DASHBOARD_SESSION_S (dashboardSessionSeconds), in Redis and the cookie's Max-Age", async () => {
    const t = testApp({ dashboardSessionSeconds: 90 });
    const res = await send(t, "/dashboard/login", {
      method: "POST",
      body: new URLSearchParams({ token: ADMIN }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(res.headers.get("set-cookie")).toMatch(/Max-Age=90;/);
    const [key] = await t.redis.keys(`${t.keys.base}session:*`);
    const left = await t.redis.pttl(key as string);
    expect(left).toBeGreaterThan(80_000);
    expect(left).toBeLessThanOrEqual(90_000);
    // Once Redis has let it go (as at its expiry), the cookie opens nothing.
    const cookie = `delayq_dashboard=${/^delayq_dashboard=([^;]*)/.exec(res.headers.get("set-cookie") ?? "")?.[1]}`;
    expect((await get(t, cookie, "/dashboard")).status).toBe(200);
    await t.redis.pexpire(key as string, 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await get(t, cookie, "/dashboard")).location).toBe("/dashboard/login");
  });

  it("end at sign-out: the same cookie, sent again, opens nothing", async () => {
    const t = testApp();
    const cookie = await login(t);
    const other = await login(t);
    const page = await get(t, cookie, "/dashboard");
    expect(page.status).toBe(200);
    await send(t, "/dashboard/logout", {
      method: "POST",
      body: new URLSearchParams({ csrf: csrfOf(page.html) }),
      headers: { cookie, "content-type": "application/x-www-form-urlencoded" },
    });
    const replayed = await get(t, cookie, "/dashboard");
    expect(replayed.status).toBe(303);
    expect(replayed.location).toBe("/dashboard/login");
    const action = await post(t, cookie, { action: "pause", topic: "x", csrf: csrfOf(page.html) });
    expect(action.status).toBe(401);
    expect((await t.call("GET", "/v1/topics/x")).json.config?.paused).toBeUndefined();
    // Only that session: another of the same token goes on.
    expect((await get(t, other, "/dashboard")).status).toBe(200);
    // A sign-out without the session's CSRF value ends nothing.
    await send(t, "/dashboard/logout", {
      method: "POST",
      body: new URLSearchParams({ csrf: "0".repeat(64) }),
      headers: { cookie: other, "content-type": "application/x-www-form-urlencoded" },
    });
    expect((await get(t, other, "/dashboard")).status).toBe(200);
  });

  it("stop working once their token leaves DQ_TOKENS, and follow its scope as DQ_TOKENS says now", async () => {
    const t = testApp();
    await t.call("POST", "/v1/jobs", { body: { topic: "shop-a.x", body: 1 } });
    await t.call("POST", "/v1/jobs", { body: { topic: "shop-b.x", body: 1 } });
    const admin = await login(t);
    const shop = await login(t, SHOP_A);
    // The same Redis, DQ_TOKENS changed: the admin token is gone, the shop's sees shop-b only.
    const next = testApp({
      test: t,
      tokens: parseTokens(`other-admin,${SHOP_A}:shop-b.*`),
    });
    const gone = await get(next, admin, "/dashboard");
    expect(gone.status).toBe(303);
    expect(gone.location).toBe("/dashboard/login");
    const scoped = await get(next, shop, "/dashboard");
    expect(scoped.status).toBe(200);
    expect(scoped.html).toContain("shop-b.x");
    expect(scoped.html).not.toContain("shop-a.x");
    // Before the change, the same cookies opened their pages.
    expect((await get(t, admin, "/dashboard")).status).toBe(200);
    expect((await get(t, shop, "/dashboard")).html).toContain("shop-a.x");
  });
});

describe("pages", () => {
  it("serve no script at all, under a CSP that forbids one, and never cached", async () => {
    const t = testApp();
    const cookie = await login(t);
    await t.call("POST", "/v1/jobs", { body: { topic: "p.t", id: "j1" } });
    for (const path of ["/dashboard", "/dashboard/topics/p.t", "/dashboard/jobs/j1", "/docs"]) {
      const page = await get(t, cookie, path);
      expect(page.status, path).toBe(200);
      expect(page.html, path).not.toMatch(/<script/i);
      expect(page.html, path).not.toMatch(/ on[a-z]+=/i);
      const csp = page.headers.get("content-security-policy") ?? "";
      expect(csp, path).toContain("default-src 'none'");
      expect(csp, path).not.toContain("unsafe");
      expect(page.headers.get("x-content-type-options"), path).toBe("nosniff");
    }
    expect((await get(t, cookie, "/dashboard")).headers.get("cache-control")).toBe("no-store");
    const css = await send(t, "/dashboard/assets/style.css");
    expect(css.headers.get("content-type")).toMatch(/^text\/css/);
  });

  it("escape job bodies (user data) everywhere they appear", async () => {
    const t = testApp();
    const cookie = await login(t);
    const evil = '</code><script>alert("x")</script><img src=x onerror=alert(1)>"\'&';
    await t.call("POST", "/v1/jobs", { body: { topic: "xss", id: "evil", body: { evil } } });
    for (const path of ["/dashboard/topics/xss?state=ready", "/dashboard/jobs/evil"]) {
      const page = await get(t, cookie, path);
      expect(page.html).not.toContain("<script>alert");
      expect(page.html).not.toContain("<img src=x");
      expect(page.html).toContain("&lt;script&gt;alert(");
    }
  });

  it("show a body exactly as stored: numbers JavaScript cannot hold are not rounded", async () => {
    const t = testApp();
    const cookie = await login(t);
    const raw = '{"amount":4200001234567890123,"tiny":1e-400,"s":"a\\"b"}';
    await t.call("POST", "/v1/jobs", {
      body: `{"topic":"raw","id":"big","body":${raw}}`,
    });
    const page = await get(t, cookie, "/dashboard/jobs/big");
    expect(page.html).toContain("4200001234567890123");
    expect(page.html).toContain("1e-400");
    expect(page.html).toContain("&quot;s&quot;: &quot;a\\&quot;b&quot;");
  });

  it("show a deeply nested body in a page linear in its size (a security pass built 392 MB from 28 KB)", async () => {
    const t = testApp();
    const cookie = await login(t);
    for (const depth of [14_000, 40_000]) {
      const deep = `${"[".repeat(depth)}1${"]".repeat(depth)}`;
      // The HTTP API refuses JSON this deep (over 512 levels); the library, or a version before
      // that rule, stores it.
      await t.queue.add({ topic: "deep", id: `d${depth}`, body: new RawJson(deep) });
      const page = await get(t, cookie, `/dashboard/jobs/d${depth}`);
      expect(page.status).toBe(200);
      // At most about 1 MiB of indented text, or twice the body.
      expect(page.html.length).toBeLessThan(Math.max(1024 * 1024, 2 * deep.length) + 50_000);
      // Past that, shown as stored.
      if (depth === 40_000) expect(page.html).toContain(deep);
    }
    // An ordinary nesting is indented, levels past 16 not further than the 16th.
    const nested = `${"[".repeat(20)}2${"]".repeat(20)}`;
    await t.call("POST", "/v1/jobs", { body: `{"topic":"deep","id":"nested","body":${nested}}` });
    const indented = (await get(t, cookie, "/dashboard/jobs/nested")).html;
    expect(indented).toContain(`\n${"  ".repeat(15)}[\n${"  ".repeat(16)}[\n`);
    expect(indented).toContain(`\n${"  ".repeat(16)}2\n${"  ".repeat(16)}]`);
    expect(indented).not.toContain(`\n${"  ".repeat(17)}`);
  });

  it("page through 10,000-topic-style lists: 50 topics a page, by name, with a next link", async () => {
    const t = testApp();
    const cookie = await login(t);
    const jobs = Array.from({ length: 120 }, (_, i) => ({
      topic: `pg.${String(i).padStart(3, "0")}`,
    }));
    await t.call("POST", "/v1/jobs/batch", { body: { jobs } });
    const first = await get(t, cookie, "/dashboard");
    const rows = (html: string) => [...html.matchAll(/<tr data-topic="([^"]+)"/g)].map((m) => m[1]);
    expect(rows(first.html)).toHaveLength(50);
    expect(rows(first.html)[0]).toBe("pg.000");
    const next = /<a href="([^"]+)" id="next-page"/.exec(first.html)?.[1]?.replace(/&amp;/g, "&");
    expect(next).toBe("/dashboard?after=pg.049&limit=50");
    const second = await get(t, cookie, next as string);
    expect(rows(second.html)[0]).toBe("pg.050");
    const last = await get(t, cookie, "/dashboard?after=pg.099");
    expect(rows(last.html)).toHaveLength(20);
    expect(last.html).not.toContain('id="next-page"');
  });

  it("page through a topic's jobs by state with the API's cursors", async () => {
    const t = testApp();
    const cookie = await login(t);
    const jobs = Array.from({ length: 7 }, (_, i) => ({
      topic: "jobs.t",
      id: `j${i}`,
      delay: i + 1,
    }));
    await t.call("POST", "/v1/jobs/batch", { body: { jobs } });
    const first = await get(t, cookie, "/dashboard/topics/jobs.t?state=delayed&limit=5");
    const ids = (html: string) => [...html.matchAll(/<tr data-id="([^"]+)"/g)].map((m) => m[1]);
    expect(ids(first.html)).toEqual(["j0", "j1", "j2", "j3", "j4"]);
    const next = /<a href="([^"]+)" id="next-page"/.exec(first.html)?.[1]?.replace(/&amp;/g, "&");
    const second = await get(t, cookie, next as string);
    expect(ids(second.html)).toEqual(["j5", "j6"]);
    expect(first.html).toContain('id="tab-delayed">delayed (7)');
  });

  it("look a job up by id, and say so when there is none", async () => {
    const t = testApp();
    const cookie = await login(t);
    await t.call("POST", "/v1/jobs", { body: { topic: "find", id: "here", delay: 30, ttr: 45 } });
    const found = await get(t, cookie, "/dashboard/find?job=here");
    expect(found.location).toBe("/dashboard/jobs/here");
    const page = await get(t, cookie, "/dashboard/jobs/here");
    expect(page.html).toContain('id="job-state">delayed');
    expect(page.html).toContain("<dt>Time to run</dt><dd>45 s</dd>");
    const missing = await get(t, cookie, "/dashboard/jobs/nope");
    expect(missing.status).toBe(404);
    expect(missing.html).toContain("job_not_found");
    const badTopic = await get(t, cookie, "/dashboard/find?topic=no%20spaces");
    expect(badTopic.status).toBe(400);
  });
});

describe("actions", () => {
  it("kick a dead job only after a confirmation", async () => {
    const t = testApp();
    const cookie = await login(t);
    await deadJob(t, "act", "d1");
    const page = await get(t, cookie, "/dashboard/topics/act?state=dead");
    const csrf = csrfOf(page.html);
    const form = {
      action: "kick",
      topic: "act",
      id: "d1",
      csrf,
      back: "/dashboard/topics/act?state=dead",
    };
    const ask = await post(t, cookie, form);
    expect(ask.status).toBe(200);
    expect(ask.html).toContain('id="confirm-yes"');
    expect((await t.call("GET", "/v1/jobs/d1")).json.job.state).toBe("dead");
    const done = await post(t, cookie, { ...form, confirm: "yes" });
    expect(done.status).toBe(303);
    expect(done.location).toBe("/dashboard/topics/act?state=dead&done=kick&n=1");
    expect((await t.call("GET", "/v1/jobs/d1")).json.job.state).toBe("ready");
    const after = await get(t, cookie, done.location as string);
    expect(after.html).toContain("Kicked the job back to ready.");
  });

  it("delete and bury, each confirmed", async () => {
    const t = testApp();
    const cookie = await login(t);
    await t.call("POST", "/v1/jobs", { body: { topic: "act2", id: "held" } });
    await t.call("POST", "/v1/topics/act2/pop", { body: {} });
    const csrf = csrfOf((await get(t, cookie, "/dashboard")).html);
    const bury = await post(t, cookie, { action: "bury", id: "held", csrf, confirm: "yes" });
    expect(bury.status).toBe(303);
    expect((await t.call("GET", "/v1/jobs/held")).json.job).toMatchObject({
      state: "dead",
      deadReason: "buried",
    });
    await post(t, cookie, { action: "delete", id: "held", csrf, confirm: "yes" });
    expect((await t.call("GET", "/v1/jobs/held")).json.job.state).toBe("deleted");
    await deadJob(t, "act2", "d2");
    await deadJob(t, "act2", "d3");
    const purge = await post(t, cookie, {
      action: "delete-dead",
      topic: "act2",
      csrf,
      confirm: "yes",
    });
    expect(purge.location).toContain("done=delete-dead&n=2");
  });

  it("promote and reschedule a waiting job from its page, without a confirmation", async () => {
    const t = testApp();
    const cookie = await login(t);
    await t.call("POST", "/v1/jobs", { body: { topic: "act3", id: "w", delay: 600 } });
    const page = await get(t, cookie, "/dashboard/jobs/w");
    expect(page.html).toContain('data-action="promote"');
    expect(page.html).toContain('id="reschedule"');
    const csrf = csrfOf(page.html);
    const back = "/dashboard/jobs/w";
    const moved = await post(t, cookie, {
      action: "reschedule",
      id: "w",
      delay: "3600",
      csrf,
      back,
    });
    expect(moved.status).toBe(303);
    expect(moved.location).toBe("/dashboard/jobs/w?done=reschedule&n=1");
    expect((await t.call("GET", "/v1/jobs/w")).json.job.dueAt).toBe(t.clock.now + 3_600_000);
    const bad = await post(t, cookie, { action: "reschedule", id: "w", delay: "soon", csrf, back });
    expect(bad.status).toBe(400);
    const promoted = await post(t, cookie, { action: "promote", id: "w", csrf, back });
    expect(promoted.status).toBe(303);
    expect((await t.call("GET", "/v1/jobs/w")).json.job.state).toBe("ready");
    const after = await get(t, cookie, promoted.location as string);
    expect(after.html).toContain("Made the job ready now.");
    // Ready: no promote any more, still a reschedule.
    expect(after.html).not.toContain('data-action="promote"');
    expect(after.html).toContain('id="reschedule"');
  });

  it("show a job's last error on its page and in the dead-letter list, escaped", async () => {
    const t = testApp();
    const cookie = await login(t);
    await t.call("POST", "/v1/jobs", { body: { topic: "errs", id: "e" } });
    await t.call("POST", "/v1/topics/errs/pop", { body: {} });
    await t.call("POST", "/v1/jobs/e/bury", { body: { error: "<b>card</b> declined" } });
    const page = await get(t, cookie, "/dashboard/jobs/e");
    expect(page.html).toMatch(
      /id="job-last-error"><code>&lt;b&gt;card&lt;\/b&gt; declined<\/code>/,
    );
    expect(page.html).toContain("attempt 1");
    const dead = await get(t, cookie, "/dashboard/topics/errs?state=dead");
    expect(dead.html).toContain('class="small last-error"');
    expect(dead.html).toContain("&lt;b&gt;card&lt;/b&gt; declined");
    expect(dead.html).not.toContain("<b>card</b>");
  });

  it("refuse a form without the session's CSRF token, or posted from another site", async () => {
    const t = testApp();
    const cookie = await login(t);
    await deadJob(t, "csrf", "c1");
    const csrf = csrfOf((await get(t, cookie, "/dashboard")).html);
    const form = { action: "delete", id: "c1", confirm: "yes" };
    expect((await post(t, cookie, form)).status).toBe(403);
    expect((await post(t, cookie, { ...form, csrf: "0".repeat(64) })).status).toBe(403);
    const crossSite = await post(t, cookie, { ...form, csrf }, { "sec-fetch-site": "cross-site" });
    expect(crossSite.status).toBe(403);
    // Another token's CSRF value does not fit this session.
    const other = await login(t, SHOP_A);
    const otherCsrf = csrfOf((await get(t, other, "/dashboard")).html);
    expect(otherCsrf).not.toBe(csrf);
    expect((await post(t, cookie, { ...form, csrf: otherCsrf })).status).toBe(403);
    expect((await t.call("GET", "/v1/jobs/c1")).json.job.state).toBe("dead");
    const noSession = await post(t, "", { ...form, csrf });
    expect(noSession.status).toBe(401);
  });

  it("go back only to a dashboard page after an action (no open redirect)", async () => {
    const t = testApp();
    const cookie = await login(t);
    const csrf = csrfOf((await get(t, cookie, "/dashboard")).html);
    for (const back of [
      "https://evil.example/x",
      "//evil.example/dashboard",
      "/v1/jobs",
      "/dashboardx",
    ]) {
      const res = await post(t, cookie, { action: "pause", topic: "redir", csrf, back });
      expect(res.location, back).toBe("/dashboard/topics/redir?done=pause&n=1");
    }
  });

  it("show a push topic's flow control and its held-back jobs", async () => {
    const t = testApp();
    const cookie = await login(t);
    // Paused, so that nothing is sent: its due jobs are held back.
    const put = await t.call("PUT", "/v1/topics/flow", {
      body: { paused: true, push: { url: "http://127.0.0.1:9/hook", rate: 5, parallelism: 2 } },
    });
    expect(put.status).toBe(200);
    for (const id of ["f1", "f2"]) {
      expect(
        (await t.call("POST", "/v1/jobs", { body: { topic: "flow", id, body: 1 } })).status,
      ).toBe(201);
    }
    const page = await get(t, cookie, "/dashboard/topics/flow");
    expect(page.html).toMatch(/id="flow-rate">at most 5 a second</);
    expect(page.html).toMatch(/id="flow-parallelism">at most 2 unanswered at once</);
    expect(page.html).toMatch(/id="held-back">2, the oldest due/);
    // A pulled topic has neither.
    await t.call("PUT", "/v1/topics/pulled", { body: { ttr: 30 } });
    const pulled = await get(t, cookie, "/dashboard/topics/pulled");
    expect(pulled.html).not.toContain('id="held-back"');
    expect(pulled.html).not.toContain('id="flow-rate"');
  });

  it("pause and resume keep the rest of the topic's config", async () => {
    const t = testApp();
    const cookie = await login(t);
    await t.call("PUT", "/v1/topics/cfg", { body: { ttr: 30, backoff: "alipay", maxAttempts: 4 } });
    const page = await get(t, cookie, "/dashboard/topics/cfg");
    expect(page.html).toContain('id="pause-topic"');
    const csrf = csrfOf(page.html);
    await post(t, cookie, { action: "pause", topic: "cfg", csrf });
    expect((await t.call("GET", "/v1/topics/cfg")).json.config).toEqual({
      ttr: 30,
      backoff: "alipay",
      maxAttempts: 4,
      paused: true,
    });
    expect((await get(t, cookie, "/dashboard/topics/cfg")).html).toContain('id="paused-badge"');
    await post(t, cookie, { action: "resume", topic: "cfg", csrf });
    expect((await t.call("GET", "/v1/topics/cfg")).json.config).toEqual({
      ttr: 30,
      backoff: "alipay",
      maxAttempts: 4,
    });
  });
});

describe("a token limited to some topics", () => {
  it("pages topics without a next link naming a topic it may not see", async () => {
    const t = testApp();
    for (const topic of ["acme.secret", "shop-a.orders", "shop-a.other"]) {
      await t.call("POST", "/v1/jobs", { body: { topic } });
    }
    const cookie = await login(t, SHOP_A);
    const first = await get(t, cookie, "/dashboard?limit=1");
    expect(first.html).toContain('data-topic="shop-a.orders"');
    const next = /href="(\/dashboard\?after=[^"]+)"/.exec(first.html)?.[1]?.replace(/&amp;/g, "&");
    expect(next).toMatch(/after=%7E/);
    expect(first.html).not.toContain("acme");
    // No "list topics after <name>" form: a name would tell whether a hidden one follows.
    expect(first.html).not.toContain('id="after"');
    expect((await get(t, await login(t), "/dashboard")).html).toContain('id="after"');
    const second = await get(t, cookie, next as string);
    expect(second.html).toContain('data-topic="shop-a.other"');
  });

  it("sees and acts on only its topics", async () => {
    const t = testApp();
    await t.call("POST", "/v1/jobs", { body: { topic: "shop-a.orders", id: "a1" } });
    await deadJob(t, "shop-b.orders", "b1");
    const cookie = await login(t, SHOP_A);
    const list = await get(t, cookie, "/dashboard");
    expect(list.html).toContain('data-topic="shop-a.orders"');
    expect(list.html).not.toContain("shop-b.orders");
    expect(list.html).toContain("token: shop-a.*, wechatpay/shop-a");
    const topic = await get(t, cookie, "/dashboard/topics/shop-b.orders");
    expect(topic.status).toBe(403);
    expect(topic.html).toContain("forbidden");
    // Another topic's job is refused, or hidden as not found: either way nothing of it shows.
    const job = await get(t, cookie, "/dashboard/jobs/b1");
    expect([403, 404]).toContain(job.status);
    expect(job.html).not.toContain("shop-b.orders");
    const csrf = csrfOf(list.html);
    const kick = await post(t, cookie, {
      action: "kick",
      topic: "shop-b.orders",
      id: "b1",
      csrf,
      confirm: "yes",
    });
    expect(kick.status).toBe(403);
    const del = await post(t, cookie, { action: "delete", id: "b1", csrf, confirm: "yes" });
    expect([403, 404]).toContain(del.status);
    expect((await t.call("GET", "/v1/jobs/b1")).json.job.state).toBe("dead");
  });
});

describe("payment watches", () => {
  it('say "no payment watches" until a source is wired in', async () => {
    const t = testApp();
    const cookie = await login(t);
    const page = await get(t, cookie, "/dashboard/payments");
    expect(page.status).toBe(200);
    expect(page.html).toContain('id="no-watches">No payment watches');
  });

  it("list what a PaymentWatchSource answers, with the session's scope, escaped", async () => {
    const asked: unknown[] = [];
    const source: PaymentWatchSource = {
      async list(options) {
        asked.push(options);
        return {
          watches: [
            {
              provider: "wechatpay",
              account: "shop",
              outTradeNo: "<order-1>",
              state: "polling",
              polls: 3,
              nextPollAt: 1_800_000_060_000,
              lastAnswer: { tradeState: "NOTPAY", at: 1_800_000_000_000 },
              deadline: 1_800_086_400_000,
              notify: ["shop-a.payments"],
            },
          ],
          cursor: "next-1",
        };
      },
    };
    const t = testApp({ paymentWatches: source });
    const cookie = await login(t, SHOP_A);
    const page = await get(t, cookie, "/dashboard/payments");
    expect(asked).toEqual([{ limit: 50, scope: ["shop-a.*"], accounts: ["wechatpay/shop-a"] }]);
    expect(page.html).toContain("&lt;order-1&gt;");
    expect(page.html).toContain("<code>NOTPAY</code>");
    // A scoped session's cursor is sealed (it may stand for another account's watch); its link
    // goes on from where the source said.
    const next = /href="\/dashboard\/payments\?cursor=(%7E[A-Za-z0-9_-]+)"/.exec(page.html)?.[1];
    expect(next, "a sealed next link").toBeDefined();
    expect((await get(t, cookie, `/dashboard/payments?cursor=${next}`)).status).toBe(200);
    expect(asked[1]).toMatchObject({ cursor: "next-1" });
  });

  it("list refund watches under them, from a RefundWatchSource, with their own sealed cursor", async () => {
    const asked: unknown[] = [];
    const source: RefundWatchSource = {
      async list(options) {
        asked.push(options);
        return {
          refunds: [
            {
              provider: "alipay",
              account: "shop",
              outRefundNo: "<refund-1>",
              outTradeNo: "order-9",
              state: "polling",
              polls: 2,
              nextPollAt: 1_800_000_300_000,
              lastAnswer: { status: "no refund_status", at: 1_800_000_060_000 },
              deadline: 1_800_604_800_000,
              notify: ["shop-a.refunds"],
            },
          ],
          cursor: "refunds-2",
        };
      },
    };
    const t = testApp({ refundWatches: source });
    const cookie = await login(t, SHOP_A);
    const page = await get(t, cookie, "/dashboard/payments");
    expect(page.status).toBe(200);
    expect(asked).toEqual([{ limit: 50, scope: ["shop-a.*"], accounts: ["wechatpay/shop-a"] }]);
    expect(page.html).toContain('id="refunds"');
    expect(page.html).toContain("&lt;refund-1&gt;");
    expect(page.html).toContain("<code>no refund_status</code>");
    const next = /href="\/dashboard\/payments\?refunds=(%7E[A-Za-z0-9_-]+)"/.exec(page.html)?.[1];
    expect(next, "a sealed next link").toBeDefined();
    expect((await get(t, cookie, `/dashboard/payments?refunds=${next}`)).status).toBe(200);
    expect(asked[1]).toMatchObject({ cursor: "refunds-2" });
  });
});
