// Push topic configs over HTTP: validated, the secret generated once and masked after, pop refused.
import { describe, expect, it } from "vitest";
import { AnsweredTopicConfig, TopicConfig } from "../../src/domain/schemas";
import { testPushApp } from "../support/push";

const URL = "https://shop.example/hooks/delayq";

describe("PUT /v1/topics/{topic} with push", () => {
  it("generates a secret, shows it once, masks it after, and keeps it on a later PUT", async () => {
    const { call } = testPushApp();
    const put = await call("PUT", "/v1/topics/p", { body: { push: { url: URL } } });
    expect(put.status).toBe(200);
    const secret = put.json.config.push.secret as string;
    expect(secret).toMatch(/^dqwh_[A-Za-z0-9_-]{43}$/);
    expect(put.json.config.push).toEqual({ url: URL, via: "direct", timeout: 15, secret });
    const got = await call("GET", "/v1/topics/p");
    expect(got.json.config.push.secret).toBe(`…${secret.slice(-4)}`);
    expect(JSON.stringify((await call("GET", "/v1/topics")).json)).not.toContain(secret);
    // Sent again without a secret (a config file re-applied), the secret stays.
    const again = await call("PUT", "/v1/topics/p", { body: { ttr: 30, push: { url: URL } } });
    expect(again.json.config.push.secret).toBe(`…${secret.slice(-4)}`);
  });

  it("never echoes a secret the caller gave, not even in the PUT answer", async () => {
    const { call } = testPushApp();
    const secret = "my-own-secret-0123456789";
    const put = await call("PUT", "/v1/topics/p", { body: { push: { url: URL, secret } } });
    expect(put.json.config.push.secret).toBe("…6789");
    expect(JSON.stringify(put.json)).not.toContain(secret);
    // The answer matches the schema the API document gives it, not the request's (whose secret
    // has at least 16 characters).
    expect(AnsweredTopicConfig.safeParse(put.json.config).success).toBe(true);
    expect(TopicConfig.safeParse(put.json.config).success).toBe(false);
  });

  it("refuses pop on a push topic (409 push_topic), in the API and the command protocol", async () => {
    const { call } = testPushApp();
    await call("PUT", "/v1/topics/p", { body: { push: { url: URL } } });
    const pop = await call("POST", "/v1/topics/p/pop");
    expect(pop.status).toBe(409);
    expect(pop.json.error.code).toBe("push_topic");
    const command = await call("POST", "/v1/command", { body: { command: "pop", topic: "p" } });
    expect(command.json.error).toMatch(/^push_topic: /);
    // push: null makes it pulled again.
    await call("PUT", "/v1/topics/p", { body: { push: null } });
    expect((await call("POST", "/v1/topics/p/pop")).status).toBe(200);
  });

  it.each([
    [{ url: "ftp://shop.example/x" }, /push.url: must be an http/],
    [{ url: "not a url" }, /push.url/],
    [{ url: URL, secret: "short" }, /push.secret: must be at least 16/],
    [{ url: URL, timeout: 0 }, /push.timeout/],
    [{ url: URL, timeout: 61 }, /push.timeout/],
    [{ url: URL, via: "sqs" }, /push.via/],
    [{ url: URL, headers: { "Content-Type": "text/plain" } }, /set by delayq or by HTTP/],
    [{ url: URL, headers: { "delayq-id": "x" } }, /set by delayq/],
    [{ url: URL, headers: { "bad header": "x" } }, /is not an HTTP header name/],
    [{ url: URL, headers: { "X-Line": "a\r\nX-Other: b" } }, /must be one line/],
    [
      { url: URL, headers: { "X-Key": "1", "x-key": "2" } },
      /push.headers.x-key: "x-key" is "X-Key" again \(header names ignore case\)/,
    ],
    // fetch cannot send it: every delivery would fail, and a QStash batch with it (issue 6 style
    // black-box pass: one such topic held back every other topic's publishes).
    [{ url: URL, headers: { "X-Euro": "10 €" } }, /push.headers.X-Euro: must be printable ASCII/],
    [
      {
        url: URL,
        headers: Object.fromEntries(Array.from({ length: 11 }, (_, n) => [`X-${n}`, "v"])),
      },
      /at most 10/,
    ],
    [{ url: URL, failureUrl: "mailto:ops@shop.example" }, /push.failureUrl/],
    // fetch refuses credentials in a URL, and they would be stored and shown with the config.
    [{ url: "https://hook:s3cret@shop.example/x" }, /push.url: must not carry a user or password/],
    [{ url: URL, failureUrl: "https://ops@shop.example/dead" }, /push.failureUrl: must not carry/],
    [{ url: URL, via: "qstash" }, /needs QStash configured/],
    [{ url: URL, extra: 1 }, /unknown field "extra"/],
  ])("refuses %j, storing nothing", async (push, message) => {
    const { call } = testPushApp();
    await call("PUT", "/v1/topics/p", { body: { ttr: 5 } });
    const res = await call("PUT", "/v1/topics/p", { body: { push } });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe("invalid_request");
    expect(res.json.error.message).toMatch(message);
    expect((await call("GET", "/v1/topics/p")).json.config).toEqual({ ttr: 5 });
  });
});

describe("PATCH /v1/topics/{topic}", () => {
  it("changes only the fields given; null removes one (issue 8.18)", async () => {
    const { call } = testPushApp();
    await call("PUT", "/v1/topics/t", { body: { ttr: 30, maxAttempts: 5, backoff: "alipay" } });
    const patched = await call("PATCH", "/v1/topics/t", { body: { paused: true, backoff: null } });
    expect(patched.status).toBe(200);
    expect(patched.json.config).toEqual({ ttr: 30, maxAttempts: 5, paused: true });
    expect((await call("GET", "/v1/topics/t")).json.config).toEqual({
      ttr: 30,
      maxAttempts: 5,
      paused: true,
    });
    const push = await call("PATCH", "/v1/topics/t", { body: { push: { url: URL } } });
    expect(push.json.config.push.secret).toMatch(/^dqwh_/);
    expect(push.json.config.ttr).toBe(30);
    const invalid = await call("PATCH", "/v1/topics/t", { body: { ttr: 0 } });
    expect(invalid.status).toBe(400);
  });
});
