// The TS client's schedule methods against the real app (schedules on the bridge): put, get,
// list, delete, and the API's errors as typed client errors.
import { describe, expect, it } from "vitest";
import { DelayqClientError } from "../../src/client";
import { createScriptRunner } from "../../src/redis/runner";
import { createSchedules } from "../../src/schedules/schedules";
import { testApp } from "../support/app";
import { TEST_PARTITIONS } from "../support/redis";
import { BASE, setup } from "./support";

function withSchedules() {
  const t = testApp();
  const schedules = createSchedules({
    scripts: createScriptRunner(t.redis, t.prefix.slice(0, -1), 3_600_000, TEST_PARTITIONS),
    defaults: { ttrMs: 60_000, maxAttempts: 10 },
  });
  return setup({}, testApp({ test: t, schedules }));
}

describe("schedules", () => {
  it("putSchedule, getSchedule, listSchedules and deleteSchedule", async () => {
    const { t, client, sent } = withSchedules();
    const now = t.clock.now;
    const put = await client.putSchedule("nightly", {
      cron: "0 2 * * *",
      timezone: "Asia/Shanghai",
      topic: "reports",
      body: { report: "nightly" },
      ttr: 120,
    });
    expect(put).toEqual({
      name: "nightly",
      cron: "0 2 * * *",
      timezone: "Asia/Shanghai",
      topic: "reports",
      body: { report: "nightly" },
      ttr: 120,
      paused: false,
      // 02:00 in Shanghai is 18:00 UTC; the test clock is 2027-01-15T08:00Z.
      nextRunAt: Date.parse("2027-01-15T18:00:00Z"),
      createdAt: now,
    });
    expect(sent[0]).toMatchObject({ method: "PUT", url: `${BASE}/v1/schedules/nightly` });
    expect(await client.getSchedule("nightly")).toEqual(put);
    await client.putSchedule("hourly", { cron: "0 * * * *", topic: "reports" });
    const page = await client.listSchedules({ limit: 1 });
    expect(page.schedules.map((s) => s.name)).toEqual(["hourly"]);
    expect(page).toMatchObject({ cursor: "hourly", hasMore: true });
    const rest = await client.listSchedules({ cursor: page.cursor });
    expect(rest.schedules.map((s) => s.name)).toEqual(["nightly"]);
    expect(rest).toMatchObject({ hasMore: false });
    expect(rest.cursor).toBeUndefined();
    await client.deleteSchedule("nightly");
    const gone = await client.getSchedule("nightly").catch((error: unknown) => error);
    expect(gone).toBeInstanceOf(DelayqClientError);
    expect(gone).toMatchObject({ code: "schedule_not_found", status: 404 });
  });

  it("a bad cron is a DelayqClientError invalid_request naming cron", async () => {
    const { client } = withSchedules();
    const error = await client
      .putSchedule("bad", { cron: "not a cron", topic: "t" })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "invalid_request", status: 400 });
    expect((error as Error).message).toMatch(/cron/);
  });
});
