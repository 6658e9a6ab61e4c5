// Input a person gets wrong: every mistake is a 400 that says what to change (issue 8.15, 8.16).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { nestsDeeper } from "../../src/http/body";
import { ADMIN, testApp } from "../support/app";

describe("query parameters", () => {
  it("refuses an unknown one, naming it, and does nothing", async () => {
    const { call } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "t", id: "a" } });
    const popped = await call("POST", "/v1/topics/t/pop");
    await call("POST", "/v1/jobs/a/bury", { body: { receipt: popped.json.jobs[0].receipt } });
    const typo = await call("DELETE", "/v1/topics/t/dead?cont=1");
    expect(typo.status).toBe(400);
    expect(typo.json.error.code).toBe("invalid_request");
    expect(typo.json.error.message).toMatch(/"cont".*count/);
    // Nothing was deleted.
    expect((await call("GET", "/v1/topics/t")).json.counts.dead).toBe(1);
    expect((await call("GET", "/v1/jobs/a?verbose=1")).status).toBe(400);
    expect((await call("GET", "/v1/topics/t/jobs?state=dead&limt=5")).json.error.message).toMatch(
      /"limt"/,
    );
    // Known ones still work.
    expect((await call("DELETE", "/v1/topics/t/dead?count=1")).json).toEqual({ deleted: 1 });
  });

  it("refuses them on HEAD as on GET (Hono answers HEAD with the GET route)", async () => {
    const { app } = testApp();
    const headers = { authorization: `Bearer ${ADMIN}` };
    for (const path of ["/v1/topics?cont=1", "/v1/topics/t/jobs?state=dead&limt=5"]) {
      expect((await app.request(path, { headers })).status, path).toBe(400);
      expect((await app.request(path, { method: "HEAD", headers })).status, path).toBe(400);
    }
    expect((await app.request("/v1/topics?limit=5", { method: "HEAD", headers })).status).toBe(200);
  });
});

describe("times and schedules", () => {
  it("refuses runAt and deadline given in seconds, saying to multiply by 1000", async () => {
    const { call } = testApp();
    const seconds = Math.floor(Date.now() / 1000) + 60;
    for (const field of ["runAt", "deadline"]) {
      const res = await call("POST", "/v1/jobs", { body: { topic: "t", [field]: seconds } });
      expect(res.status).toBe(400);
      expect(res.json.error.message).toContain(`${field}: must be unix milliseconds`);
      expect(res.json.error.message).toContain("multiply by 1000");
    }
    expect((await call("GET", "/v1/topics/t")).json.counts).toMatchObject({ ready: 0, delayed: 0 });
  });

  it("explains the forms of runAt and backoff instead of 'Invalid input'", async () => {
    const { call } = testApp();
    const runAt = await call("POST", "/v1/jobs", { body: { topic: "t", runAt: "tomorrow" } });
    expect(runAt.json.error.message).toMatch(/runAt: must be unix milliseconds .* ISO-8601/);
    const backoff = await call("POST", "/v1/jobs", { body: { topic: "t", backoff: "weekly" } });
    expect(backoff.json.error.message).toMatch(/backoff: must be seconds/);
    expect(backoff.json.error.message).toContain("wechatpay, alipay, youzan");
    expect(backoff.json.error.message).toContain('"type": "exponential"');
    expect(backoff.json.error.message).not.toContain("Invalid input");
  });
});

describe("bodies that would hold the event loop", () => {
  it("refuses JSON nested deeper than 512 levels, before parsing it, on every JSON route", async () => {
    const { call, app } = testApp();
    const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;
    // 512 levels in all, the request's own object counted: the body may nest 511.
    const kept = await call("POST", "/v1/jobs", {
      body: `{"topic":"t","id":"deep-ok","body":${nested(511)}}`,
    });
    expect(kept.status).toBe(201);
    expect((await call("GET", "/v1/jobs/deep-ok")).json.job.body).toEqual(JSON.parse(nested(511)));
    // Brackets inside strings, escaped quotes included, are text, not nesting.
    const text = `"\\"${"[".repeat(2000)}{"`;
    expect(
      (await call("POST", "/v1/jobs", { body: `{"topic":"t","id":"deep-str","body":${text}}` }))
        .status,
    ).toBe(201);
    for (const [path, body] of [
      ["/v1/jobs", `{"topic":"t","id":"deep-no","body":${nested(512)}}`],
      ["/v1/jobs/batch", `{"jobs":${nested(4_000_000)}}`],
      ["/v1/command", `[{"command":"add","topic":"t","body":{"a":${nested(600)}}}]`],
      ["/compat/ouqiang/admin-token/push", `{"topic":"t","id":"o","body":${nested(600)}}`],
    ] as const) {
      const res = await app.request(path, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
        body,
      });
      const answer = await res.text();
      expect(answer, path).toContain("more than 512 levels deep");
      if (!path.startsWith("/compat")) expect(res.status, path).toBe(400);
    }
    expect((await call("GET", "/v1/jobs/deep-no")).status).toBe(404);
  });

  it("counts nesting as the parsed value nests, strings and their escapes not counted", () => {
    /** How deep a parsed value nests: each array and object is a level. */
    const depth = (value: unknown): number =>
      value !== null && typeof value === "object"
        ? 1 + Math.max(0, ...Object.values(value).map(depth))
        : 0;
    // Strings full of what the scan must pass over: quotes, backslashes, brackets.
    const tricky = fc.string({ unit: fc.constantFrom('"', "\\", "[", "{", "]", "}", "a", "é") });
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: "small" },
        tricky,
        fc.integer(),
        fc.array(tie("node"), { maxLength: 4 }),
        fc.dictionary(tricky, tie("node"), { maxKeys: 4 }),
      ),
    })).node;
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 8 }), (v, limit) => {
        const text = JSON.stringify(v);
        expect(nestsDeeper(text, limit)).toBe(depth(v) > limit);
      }),
      { numRuns: 2000 },
    );
  });

  it("names the first 20 unknown fields and counts the rest", async () => {
    const { call } = testApp();
    const fields = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`f${i}`, 1]));
    const res = await call("POST", "/v1/jobs", { body: { topic: "t", ...fields } });
    expect(res.status).toBe(400);
    const first = Array.from({ length: 20 }, (_, i) => `"f${i}"`).join(", ");
    expect(res.json.error.message).toBe(
      `Invalid request body: unknown fields ${first} and 9980 more`,
    );
    const long = "x".repeat(500);
    const one = await call("POST", "/v1/jobs", { body: { topic: "t", [long]: 1 } });
    expect(one.json.error.message).toBe(`Invalid request body: unknown field "${"x".repeat(64)}…"`);
    // A key quoted in a path or a message is cut too: a megabyte's name made a message of two.
    const name = `X-${"y".repeat(1_000_000)}`;
    const headers = await call("PUT", "/v1/topics/t", {
      body: { push: { url: "https://shop.example/hook", headers: { [name]: "1" } } },
    });
    expect(headers.status).toBe(400);
    expect(headers.json.error.message).toContain("is not an HTTP header name");
    expect(headers.json.error.message.length).toBeLessThan(400);
  });
});

describe("what an error quotes of the caller's", () => {
  it("is cut at 64 characters, and a list of names at 20, on every route", async () => {
    const { call } = testApp();
    // 3,000 unknown query parameters: twenty named, the rest counted.
    const query = Array.from({ length: 3000 }, (_, i) => `p${i}${"q".repeat(80)}=1`).join("&");
    const params = await call("GET", `/v1/topics?${query}`);
    expect(params.status).toBe(400);
    expect(params.json.error.message).toContain("and 2980 more");
    expect(params.json.error.message.length).toBeLessThan(2000);
    // A command's id that no command could have is cut in its result.
    const long = "i".repeat(5000);
    const commands = await call("POST", "/v1/command", {
      body: [
        { command: "nope", id: long },
        { command: "nope", id: "mine-1" },
      ],
    });
    expect(commands.json[0].id).toBe(`${"i".repeat(64)}…`);
    expect(commands.json[1].id).toBe("mine-1");
    // ouqiang's pop of a topic that is no name.
    const topic = `${"t".repeat(200_000)}!`;
    const pop = await call("POST", `/compat/ouqiang/${ADMIN}/pop`, {
      body: { topic, wait: 0 },
      token: null,
    });
    expect(pop.json.code).not.toBe(0);
    expect(JSON.stringify(pop.json).length).toBeLessThan(1000);
  });
});
