// Job bodies over HTTP are kept as the client's JSON text: big integers, huge exponents and the
// client's own spacing come back exactly as sent (issue 8.6).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RawJson } from "../../src/domain/raw-json";
import { keepRawBodies } from "../../src/http/raw-bodies";
import { ADMIN, testApp } from "../support/app";

const BODY = '{"tx":4200001234567890123, "amount":"12.30","f":1e400,"n":[2.0,-0.0]}';

/** Sends raw text and returns the response's raw text. */
async function send(
  app: ReturnType<typeof testApp>["app"],
  method: string,
  path: string,
  body?: string,
) {
  const res = await app.request(path, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body,
  });
  return { status: res.status, text: await res.text() };
}

describe("job bodies over HTTP", () => {
  it("are stored and answered byte for byte: add, get, pop, release, list", async () => {
    const { app } = testApp();
    const added = await send(app, "POST", "/v1/jobs", `{"topic":"t","id":"big","body":${BODY}}`);
    expect(added.status).toBe(201);
    expect(added.text).toContain(`"body":${BODY}`);
    expect((await send(app, "GET", "/v1/jobs/big")).text).toContain(`"body":${BODY}`);
    const popped = await send(app, "POST", "/v1/topics/t/pop", "{}");
    expect(popped.text).toContain(`"body":${BODY}`);
    const receipt = JSON.parse(popped.text).jobs[0].receipt;
    const released = await send(app, "POST", "/v1/jobs/big/release", JSON.stringify({ receipt }));
    expect(released.text).toContain(`"body":${BODY}`);
    const listed = await send(app, "GET", "/v1/topics/t/jobs?state=ready");
    expect(listed.text).toContain(`"body":${BODY}`);
    // The rest of the answer is ordinary JSON.
    expect(JSON.parse(listed.text).jobs[0].id).toBe("big");
  });

  it("keeps each body of a batch, and of the command protocol", async () => {
    const { app } = testApp();
    const batch = await send(
      app,
      "POST",
      "/v1/jobs/batch",
      `{"jobs":[{"topic":"b","id":"b1","body":${BODY}},{"topic":"b","id":"b2","body":"x"}]}`,
    );
    expect(batch.status).toBe(200);
    expect(batch.text).toContain(`"body":${BODY}`);
    const command = await send(
      app,
      "POST",
      "/v1/command",
      `[{"command":"add","topic":"c","id":"c1","body":${BODY}},{"command":"pop","topic":"c"}]`,
    );
    expect(command.status).toBe(200);
    expect(command.text).toContain(`"value":${BODY}`);
  });

  it("escapes nothing twice and mixes with strings that look like the placeholder", async () => {
    const { app } = testApp();
    const tricky = '{"s":"\\u0000raw0:0","q":"\\"quoted\\"","u":"\\u2028"}';
    await send(app, "POST", "/v1/jobs", `{"topic":"t","id":"tricky","body":${tricky}}`);
    const got = await send(app, "GET", "/v1/jobs/tricky");
    expect(got.text).toContain(`"body":${tricky}`);
    expect(JSON.parse(got.text).job.body).toEqual(JSON.parse(tricky));
  });
});

describe("the body scan", () => {
  it("passes over nested JSON outside the bodies, and keeps a body nested to the limit", async () => {
    const { app } = testApp();
    // 511 levels and the request's own object: the deepest a request may nest (MAX_JSON_DEPTH).
    const deep = `${"[".repeat(511)}${"]".repeat(511)}`;
    const outside = await send(app, "POST", "/v1/jobs", `{"topic":"t","x":${deep}}`);
    expect(outside.status).toBe(400); // the unknown field, not a crash
    expect(outside.text).toContain('unknown field \\"x\\"');
    const inside = await send(app, "POST", "/v1/jobs", `{"topic":"t","id":"deep","body":${deep}}`);
    expect(inside.status).toBe(201);
    expect((await send(app, "GET", "/v1/jobs/deep")).text).toContain(`"body":${deep}`);
  });

  it("finds a body behind escaped keys, takes the last of duplicate keys, and keeps scalars", () => {
    const text = '{"topic":"t","b\\u006fdy":1,"body" : 4200001234567890123 ,"id":"x"}';
    const parsed = JSON.parse(text) as { body: unknown };
    expect(keepRawBodies("/v1/jobs", text, parsed)).toBe(true);
    expect(parsed.body).toEqual(new RawJson("4200001234567890123"));
    const escaped = '{"b\\u006fdy":[1.50, "a\\"b"]}';
    const other = JSON.parse(escaped) as { body: unknown };
    keepRawBodies("/v1/jobs", escaped, other);
    expect(other.body).toEqual(new RawJson('[1.50, "a\\"b"]'));
  });

  it("gives each body the exact text it had, whatever surrounds it (property)", () => {
    const space = fc.constantFrom("", " ", "\n  ", "\t");
    const json = fc.json({ maxDepth: 3 });
    fc.assert(
      fc.property(
        fc.array(fc.tuple(json, space, space), { minLength: 1, maxLength: 4 }),
        json,
        space,
        (bodies, noise, ws) => {
          // A batch: each item has its body somewhere among other fields, spaced as generated.
          const items = bodies.map(
            ([body, a, b], i) =>
              `{${a}"topic"${ws}:${ws}"t",${b}"x"${ws}:${ws}${noise},${a}"body"${b}:${a}${body}${b}, "id":"j${i}"}`,
          );
          const text = `{${ws}"skip":${noise},${ws}"jobs"${ws}:${ws}[${items.join(`,${ws}`)}]${ws}}`;
          const parsed = JSON.parse(text) as { jobs: { body: unknown }[] };
          keepRawBodies("/v1/jobs/batch", text, parsed);
          expect(parsed.jobs.map((job) => job.body)).toEqual(
            bodies.map(([body]) => new RawJson(body)),
          );
        },
      ),
      { numRuns: 300 },
    );
  });
});
