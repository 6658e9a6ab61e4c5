// A push topic's `headers` carry credentials (an X-Api-Key, a bearer token for the receiver): their
// values are masked like the secret (`…` and the last 4) in every answer and on the dashboard,
// still sent whole with each delivery, and never logged.
import { afterAll, describe, expect, it } from "vitest";
import { delivery } from "../../src/http/pages/dashboard-pieces";
import { type Receiver, startReceiver, testPushApp } from "../support/push";

const receivers: Receiver[] = [];
afterAll(async () => {
  await Promise.all(receivers.map((receiver) => receiver.close()));
});

const API_KEY = "k_live_Zq81xw0p9T3m";
const BEARER = "Bearer eyJhbGciOi.receiver-token";
const SECRET = "whsec_0123456789abcdef";

describe("push headers", () => {
  it("are masked in the PUT and PATCH answers, GET of the topic and the topic list", async () => {
    const receiver = await startReceiver();
    receivers.push(receiver);
    const app = testPushApp();
    const push = {
      url: `${receiver.url}/hook`,
      secret: SECRET,
      headers: { "X-Api-Key": API_KEY, Authorization: BEARER, "X-Short": "abc" },
    };
    // The last 4 characters; "…" alone for a value too short to show any of.
    const masked = { "X-Api-Key": "…9T3m", Authorization: "…oken", "X-Short": "…" };
    const answers = [
      await app.call("PUT", "/v1/topics/hooked", { body: { push } }),
      await app.call("PATCH", "/v1/topics/hooked", { body: { ttr: 30 } }),
      await app.call("GET", "/v1/topics/hooked"),
      await app.call("GET", "/v1/topics"),
    ];
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      const text = JSON.stringify(answer.json);
      for (const value of [API_KEY, BEARER, "abc", SECRET]) expect(text).not.toContain(value);
    }
    expect(answers[0]?.json.config.push).toMatchObject({ secret: "…cdef", headers: masked });
    expect(answers[1]?.json.config.push.headers).toEqual(masked);
    expect(answers[2]?.json.config.push.headers).toEqual(masked);
    const listed = answers[3]?.json.topics.find((t: { topic: string }) => t.topic === "hooked");
    expect(listed.config.push.headers).toEqual(masked);

    // Delivered whole, and logged nowhere.
    await app.call("POST", "/v1/jobs", { body: { topic: "hooked", id: "h1" } });
    await app.settled();
    const [got] = await receiver.waitFor(1);
    expect(got?.headers["x-api-key"]).toBe(API_KEY);
    expect(got?.headers.authorization).toBe(BEARER);
    expect(JSON.stringify(app.logs)).not.toMatch(/k_live|receiver-token/);
  });

  it("a masked value sent back is refused, not stored over the real one", async () => {
    const app = testPushApp();
    const put = await app.call("PUT", "/v1/topics/back", {
      body: { push: { url: "https://example.com/hook", headers: { "X-Api-Key": "…T3m0" } } },
    });
    expect(put.status).toBe(400);
    expect(put.json.error.message).toMatch(/push\.headers\.X-Api-Key: must be printable ASCII/);
  });

  it("are masked on the dashboard's topic page", () => {
    const html = String(
      delivery(
        {
          push: {
            url: "https://example.com/hook",
            via: "direct",
            timeout: 15,
            secret: SECRET,
            headers: { "X-Api-Key": API_KEY },
          },
        },
        true,
      ),
    );
    expect(html).toContain(`X-Api-Key: …${API_KEY.slice(-4)}`);
    expect(html).not.toContain(API_KEY);
    expect(html).toContain("…cdef");
  });
});
