// Requests through @hono/node-server (how functions/node.ts serves the app), sent as raw HTTP:
// bodies with and without Content-Length and Content-Type, within and over the size limit; a
// long-poll whose client hangs up.
import { request } from "node:http";
import { type ServerType, serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../dev/redis-server";
import { ADMIN, type TestApp, testApp } from "../support/app";

const BODY = '{"tx":4200001234567890123, "f":1e400}';
const LIMIT = 4096;

let test: TestApp;
let server: ServerType;
let port: number;

beforeAll(async () => {
  test = testApp({ maxRequestBytes: LIMIT });
  port = await freePort();
  await new Promise<void>((resolve) => {
    server = serve({ fetch: test.app.fetch, port, hostname: "127.0.0.1" }, () => resolve());
  });
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** One request; `chunked` sends the body without a Content-Length, in pieces. */
function send(
  path: string,
  body: string,
  options: { type?: string | null; chunked?: boolean } = {},
): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { authorization: `Bearer ${ADMIN}` };
  const type = options.type === undefined ? "application/json" : options.type;
  if (type !== null) headers["content-type"] = type;
  if (!options.chunked) headers["content-length"] = String(Buffer.byteLength(body));
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method: "POST", headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      res.on("error", reject);
    });
    req.on("error", reject);
    if (options.chunked) {
      for (let i = 0; i < body.length; i += 1000) req.write(body.slice(i, i + 1000));
      req.end();
    } else req.end(body);
  });
}

const job = (id: string, body = BODY) => `{"topic":"nb","id":"${id}","body":${body}}`;

describe("request bodies on @hono/node-server", () => {
  it("keeps a JSON body as sent, with or without Content-Length", async () => {
    for (const [id, chunked] of [
      ["sized", false],
      ["chunked", true],
    ] as const) {
      const added = await send("/v1/jobs", job(id), { chunked });
      expect(added.status).toBe(201);
      expect(added.text).toContain(`"body":${BODY}`);
    }
    const popped = await send("/v1/topics/nb/pop", '{"count":2}');
    expect(popped.status).toBe(200);
    expect(popped.text.split(`"body":${BODY}`)).toHaveLength(3);
  });

  it("reads the body as JSON whatever the Content-Type says, or without one", async () => {
    const form = await send("/v1/jobs", job("form"), {
      type: "application/x-www-form-urlencoded",
    });
    expect(form.status).toBe(201);
    expect(form.text).toContain(`"body":${BODY}`);
    const none = await send("/v1/jobs", job("none"), { type: null });
    expect(none.status).toBe(201);
    const utf8 = await send("/v1/jobs", job("charset", '"ünï 😀"'), {
      type: "application/json; charset=utf-8",
    });
    expect(utf8.status).toBe(201);
    expect(utf8.text).toContain('"body":"ünï 😀"');
  });

  it("takes an empty body as no body", async () => {
    const res = await send("/v1/topics/empty/pop", "");
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ jobs: [] });
  });

  it("answers 400 for text that is not JSON, and 413 over the limit, sized or chunked", async () => {
    const bad = await send("/v1/jobs", '{"topic":"nb",');
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text).error.code).toBe("invalid_request");
    const big = job("big", JSON.stringify("x".repeat(LIMIT)));
    for (const chunked of [false, true]) {
      const res = await send("/v1/jobs", big, { chunked });
      expect(res.status).toBe(413);
      expect(JSON.parse(res.text).error.code).toBe("payload_too_large");
    }
  });
});

describe("a long-poll on @hono/node-server", () => {
  it("ends when its client hangs up, so a job added afterwards goes to the next pop", async () => {
    const headers = { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" };
    const gone = request({
      host: "127.0.0.1",
      port,
      path: "/v1/topics/gone/pop",
      method: "POST",
      headers,
    });
    gone.on("error", () => {}); // the hang-up below
    gone.end('{"wait":10}');
    await sleep(300); // the pop found nothing and waits
    gone.destroy();
    await sleep(300); // the wait looks at its request's abort state every 20 ms
    expect((await send("/v1/jobs", '{"topic":"gone","id":"after"}')).status).toBe(201);
    // A waiter still there would see the change within its poll interval (1 s) and reserve it.
    await sleep(1500);
    const next = await send("/v1/topics/gone/pop", "{}");
    expect(next.status).toBe(200);
    expect(JSON.parse(next.text).jobs.map((job: { id: string }) => job.id)).toEqual(["after"]);
  });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
