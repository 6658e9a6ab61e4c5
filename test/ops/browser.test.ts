// The dashboard and /docs in a real headless Chromium (Debian's, driven by playwright-core): sign in,
// watch counts change, kick a dead job, pause a topic, refuse a wrong token, never run a job body.
// Screenshots go to test-results/ops/ (git-ignored). Any request off 127.0.0.1 fails the test.
import { mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { type ServerType, serve } from "@hono/node-server";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, SHOP_A, type TestApp, testApp } from "../support/app";
import { chromiumPath, mustHave, skipFor } from "../support/tools";

/** Why the suite is skipped: no browser, outside CI (tools-setup.ts prints it). */
const skip = skipFor("chromium");
const SHOTS = "test-results/ops";

let t: TestApp;
let server: ServerType;
let base: string;
let browser: Browser;
const offsite: string[] = [];

beforeAll(async () => {
  if (skip) return;
  mustHave("chromium");
  mkdirSync(SHOTS, { recursive: true });
  t = testApp();
  await new Promise<void>((resolve) => {
    server = serve({ fetch: t.app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve());
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await chromium.launch({
    executablePath: chromiumPath(),
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}, 30_000);

afterAll(async () => {
  if (skip) return;
  await browser?.close();
  if (server) await new Promise((resolve) => server.close(resolve));
  expect(offsite, "requests that left the machine").toEqual([]);
});

/** A fresh browser profile whose requests may only go to the service. */
async function fresh(): Promise<{ context: BrowserContext; page: Page; dialogs: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  await context.route("**/*", (route) => {
    const url = new URL(route.request().url());
    if (url.hostname === "127.0.0.1") return route.continue();
    offsite.push(url.href);
    return route.abort();
  });
  const page = await context.newPage();
  const dialogs: string[] = [];
  page.on("dialog", (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  return { context, page, dialogs };
}

async function signIn(page: Page, token: string): Promise<void> {
  await page.goto(`${base}/dashboard`);
  await page.waitForURL(`${base}/dashboard/login`);
  await page.fill("#token", token);
  await page.click("#sign-in");
}

const cell = (page: Page, topic: string, state: string) =>
  page.locator(`tr[data-topic="${topic}"] td[data-count="${state}"]`);

describe.skipIf(skip)("the dashboard in Chromium", () => {
  it("refuses a wrong token and keeps no session", async () => {
    const { context, page } = await fresh();
    await signIn(page, `${ADMIN}-wrong`);
    await expect.poll(() => page.locator("#login-error").textContent()).toContain("not valid");
    await page.screenshot({ path: `${SHOTS}/login-refused.png` });
    expect(await context.cookies()).toEqual([]);
    await page.goto(`${base}/dashboard`);
    expect(page.url()).toBe(`${base}/dashboard/login`);
    await context.close();
  });

  it("signs in and shows a topic's counts change after an add", async () => {
    await t.call("POST", "/v1/jobs", { body: { topic: "web.orders", id: "o1", body: { n: 1 } } });
    const { context, page } = await fresh();
    await signIn(page, ADMIN);
    await page.waitForURL(`${base}/dashboard`);
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: "delayq_dashboard", httpOnly: true, sameSite: "Strict" });
    expect(page.url()).not.toContain(ADMIN);
    expect(await cell(page, "web.orders", "ready").textContent()).toBe("1");
    await page.screenshot({ path: `${SHOTS}/topics-before-add.png` });

    await t.call("POST", "/v1/jobs/batch", {
      body: {
        jobs: [
          { topic: "web.orders", id: "o2" },
          { topic: "web.orders", id: "o3" },
          { topic: "web.orders", id: "later", delay: 600 },
        ],
      },
    });
    await page.reload();
    expect(await cell(page, "web.orders", "ready").textContent()).toBe("3");
    expect(await cell(page, "web.orders", "delayed").textContent()).toBe("1");
    await page.screenshot({ path: `${SHOTS}/topics-after-add.png` });
    // The page script cannot read the token: the cookie is HttpOnly.
    expect(await page.evaluate("document.cookie")).toBe("");
    await context.close();
  });

  it("kicks a dead job, after a confirmation", async () => {
    await t.call("POST", "/v1/jobs", { body: { topic: "web.dead", id: "dead-1", body: "x" } });
    await t.call("POST", "/v1/topics/web.dead/pop", { body: {} });
    await t.call("POST", "/v1/jobs/dead-1/bury", { body: {} });
    const { context, page } = await fresh();
    await signIn(page, ADMIN);
    await page.waitForURL(`${base}/dashboard`);
    await page.click('tr[data-topic="web.dead"] td[data-count="dead"] a');
    await page.waitForURL(/\/dashboard\/topics\/web\.dead\?state=dead/);
    expect(await page.locator("#count-dead .v").textContent()).toBe("1");
    await page.click('tr[data-id="dead-1"] button[data-action="kick"]');
    await page.waitForSelector("#confirm");
    expect(await page.locator("#confirm").textContent()).toContain("dead-1");
    await page.screenshot({ path: `${SHOTS}/kick-confirm.png` });
    expect((await t.call("GET", "/v1/jobs/dead-1")).json.job.state).toBe("dead");
    await page.click("#confirm-yes");
    await page.waitForSelector("#notice");
    expect(await page.locator("#notice").textContent()).toContain("Kicked the job back to ready");
    expect(await page.locator("#count-dead .v").textContent()).toBe("0");
    expect(await page.locator("#count-ready .v").textContent()).toBe("1");
    await page.screenshot({ path: `${SHOTS}/kick-done.png` });
    expect((await t.call("GET", "/v1/jobs/dead-1")).json.job.state).toBe("ready");
    await context.close();
  });

  it("pauses and resumes a topic", async () => {
    await t.call("PUT", "/v1/topics/web.pause", { body: { ttr: 30 } });
    const { context, page } = await fresh();
    await signIn(page, ADMIN);
    await page.waitForURL(`${base}/dashboard`);
    await page.goto(`${base}/dashboard/topics/web.pause`);
    await page.click("#pause-topic");
    await page.waitForSelector("#paused-badge");
    expect(await page.locator("#notice").textContent()).toContain("Paused the topic");
    await page.screenshot({ path: `${SHOTS}/topic-paused.png` });
    expect((await t.call("GET", "/v1/topics/web.pause")).json.config).toEqual({
      ttr: 30,
      paused: true,
    });
    const popped = await t.call("POST", "/v1/topics/web.pause/pop", { body: {} });
    expect(popped.json.jobs).toEqual([]);
    await page.click("#resume-topic");
    await page.waitForSelector("#pause-topic");
    expect(await page.locator("#paused-badge").count()).toBe(0);
    expect((await t.call("GET", "/v1/topics/web.pause")).json.config).toEqual({ ttr: 30 });
    await context.close();
  });

  it("never runs a job body: it is shown as text", async () => {
    const body =
      '<script>window.__owned=1;alert("body")</script><img src=x onerror="window.__owned=2">';
    await t.call("POST", "/v1/jobs", { body: { topic: "web.xss", id: "xss-1", body } });
    const { context, page, dialogs } = await fresh();
    await signIn(page, ADMIN);
    await page.waitForURL(`${base}/dashboard`);
    for (const path of ["/dashboard/topics/web.xss?state=ready", "/dashboard/jobs/xss-1"]) {
      await page.goto(`${base}${path}`);
      expect(await page.evaluate("window.__owned")).toBeUndefined();
    }
    expect(await page.locator("#job-body").textContent()).toContain("<script>window.__owned=1");
    await page.screenshot({ path: `${SHOTS}/job-xss-as-text.png` });
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it("shows a token limited to some topics only those", async () => {
    await t.call("POST", "/v1/jobs", { body: { topic: "shop-a.web", id: "sa1" } });
    const { context, page } = await fresh();
    await signIn(page, SHOP_A);
    await page.waitForURL(`${base}/dashboard`);
    const topics = await page
      .locator("tr[data-topic]")
      .evaluateAll((rows) => rows.map((row) => row.getAttribute("data-topic")));
    expect(topics).toEqual(["shop-a.web"]);
    await page.goto(`${base}/dashboard/topics/web.orders`);
    expect(await page.locator("#page-error").textContent()).toContain("forbidden");
    await page.click("#sign-out");
    await page.waitForURL(`${base}/dashboard/login`);
    expect(await context.cookies()).toEqual([]);
    await context.close();
  });

  it("renders /docs offline with every route and schema", async () => {
    const { context, page } = await fresh();
    await page.goto(`${base}/docs`);
    expect(await page.title()).toBe("delayq API");
    const routes = await page.locator("section.op").count();
    expect(routes).toBeGreaterThanOrEqual(18);
    expect(await page.locator("#schema-Job").isVisible()).toBe(true);
    const stylesheet = await page.evaluate("document.styleSheets.length");
    expect(stylesheet).toBe(1);
    await page.screenshot({ path: `${SHOTS}/docs.png` });
    await page.locator("#op-post-v1-jobs").scrollIntoViewIfNeeded();
    await page.screenshot({ path: `${SHOTS}/docs-add-job.png` });
    await context.close();
  });
});
