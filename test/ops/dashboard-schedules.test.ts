// The dashboard's schedules page through the real app and Redis: name, cron, zone, topic, next
// and last run, paused; a topic-limited session sees its topics' schedules only.
import { describe, expect, it } from "vitest";
import { createScriptRunner } from "../../src/redis/runner";
import { createSchedules } from "../../src/schedules/schedules";
import { ADMIN, SHOP_A, type TestApp, testApp } from "../support/app";
import { TEST_PARTITIONS } from "../support/redis";

async function page(t: TestApp, path: string, token = ADMIN): Promise<string> {
  const login = await t.app.request("/dashboard/login", {
    method: "POST",
    redirect: "manual",
    body: new URLSearchParams({ token }),
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] as string;
  const res = await t.app.request(path, { headers: { cookie, "sec-fetch-site": "same-origin" } });
  expect(res.status).toBe(200);
  return res.text();
}

describe("/dashboard/schedules", () => {
  it("lists schedules with their next and last runs, and a limited session its own only", async () => {
    const base = testApp();
    const schedules = createSchedules({
      scripts: createScriptRunner(base.redis, base.prefix.slice(0, -1), 3_600_000, TEST_PARTITIONS),
      defaults: { ttrMs: 60_000, maxAttempts: 10 },
    });
    const t = testApp({ test: base, schedules });
    await t.call("PUT", "/v1/schedules/minutely", {
      body: { cron: "* * * * *", timezone: "Asia/Shanghai", topic: "shop-a.reports" },
    });
    await t.call("PUT", "/v1/schedules/held", {
      body: { cron: "0 8 * * *", topic: "other", paused: true },
    });
    // A minute and a half on: the first fire (08:01) is the last run, 08:02 the next.
    t.clock.advance(90_000);
    const html = await page(t, "/dashboard/schedules");
    expect(html).toContain('href="/dashboard/schedules"');
    const rows = html.split("<tr>").slice(2);
    expect(rows).toHaveLength(2);
    const [held, minutely] = rows as [string, string];
    expect(held).toContain("held");
    expect(held).toContain("paused");
    expect(minutely).toContain("<code>* * * * *</code>");
    expect(minutely).toContain("Asia/Shanghai");
    expect(minutely).toContain("shop-a.reports");
    expect(minutely).toContain("2027-01-15T08:02:00Z");
    expect(minutely).toContain("2027-01-15T08:01:00Z");
    expect(minutely).toContain("active");
    const limited = await page(t, "/dashboard/schedules", SHOP_A);
    expect(limited).toContain("minutely");
    expect(limited).not.toContain("held");
  });
});
