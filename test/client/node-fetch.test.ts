// nodeFetch (delayq/client/node): the client over node:http against the real app served on a real
// socket, its answers compared with Node's global fetch (an independent implementation), and the
// edges a transport owns: time limits, the caller's abort, refused connections, keep-alive, text
// split inside a character.
import { readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../dev/redis-server";
import { type ClientOptions, createClient } from "../../src/client";
import { nodeFetch } from "../../src/client/node";
import { ADMIN, testApp } from "../support/app";
import { makeTestCerts } from "../support/tls";
import { brokenApp, failure } from "./support";

/**
 * Serves `app` on a free port, over https with `tls` (its URL then names localhost, which the
 * test certificate is for); the connections it accepted are counted.
 */
async function served(
  fetch: (request: Request) => Response | Promise<Response>,
  tls?: { key: Buffer; cert: Buffer },
) {
  const port = await freePort();
  const server = (
    tls
      ? serve({
          fetch,
          port,
          hostname: "127.0.0.1",
          createServer: createHttpsServer,
          serverOptions: tls,
        })
      : serve({ fetch, port, hostname: "127.0.0.1" })
  ) as Server;
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const stats = { connections: 0 };
  server.on("connection", () => stats.connections++);
  const url = tls ? `https://localhost:${port}` : `http://127.0.0.1:${port}`;
  return { url, server, stats };
}

/** A client of `baseUrl` (the admin token) over nodeFetch, `options` on top. */
const clientOf = (baseUrl: string, options: Partial<ClientOptions> = {}) =>
  createClient({ baseUrl, token: ADMIN, fetch: nodeFetch(), ...options });

/** A plain node:http server answering with `handler`. */
async function plain(handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const close = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

describe("nodeFetch: the client over node:http", () => {
  const t = testApp();
  let service: Awaited<ReturnType<typeof served>>;
  beforeAll(async () => {
    service = await served((request) => t.app.fetch(request));
  });
  afterAll(() => close(service.server));

  it("adds, pops and finishes a job through the real app on a socket", async () => {
    const client = clientOf(service.url);
    const { created, job } = await client.add({ topic: "node-fetch", body: { note: "né 🎉" } });
    expect(created).toBe(true);
    const [popped] = await client.pop("node-fetch");
    expect(popped).toMatchObject({ id: job.id, body: { note: "né 🎉" }, state: "reserved" });
    await client.finish(job.id, { receipt: popped?.receipt });
    expect((await client.get(job.id)).state).toBe("finished");
    const error = await failure(client.get("no-such-job"));
    expect(error).toMatchObject({ code: "job_not_found", status: 404 });
  });

  it("answers as the global fetch does: status, headers and text, for answers and errors", async () => {
    const send = nodeFetch();
    // The add's answer carries times: each side adds its own job, and the get reads the one job.
    const add = (id: string): RequestInit => ({
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify({ topic: "same", body: "ü", id }),
    });
    const [mine, theirs] = [
      await send(`${service.url}/v1/jobs`, add("a")),
      await fetch(`${service.url}/v1/jobs`, add("b")),
    ];
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    const [a, b] = [JSON.parse(await mine.text()), JSON.parse(await theirs.text())];
    expect({ ...a.job, id: "b", createdAt: 0, dueAt: 0 }).toEqual({
      ...b.job,
      createdAt: 0,
      dueAt: 0,
    });
    const calls: [string, RequestInit][] = [
      ["/health", { method: "GET" }],
      ["/v1/jobs/a", { method: "GET", headers: { authorization: `Bearer ${ADMIN}` } }],
      ["/v1/jobs/nope", { method: "GET", headers: [["authorization", `Bearer ${ADMIN}`]] }],
      ["/v1/topics", { method: "GET", headers: new Headers({ authorization: "Bearer wrong" }) }],
      ["/v1/jobs", { method: "POST", headers: { authorization: `Bearer ${ADMIN}` }, body: "{" }],
    ];
    for (const [path, init] of calls) {
      const mine = await send(`${service.url}${path}`, init);
      const theirs = await fetch(`${service.url}${path}`, init);
      const where = `${init.method} ${path}`;
      expect(mine.status, where).toBe(theirs.status);
      expect(mine.headers.get("Content-Type"), where).toBe(theirs.headers.get("content-type"));
      expect(mine.headers.get("x-absent"), where).toBeNull();
      // Each answer has its own request id (x-request-id, and requestId in an error's body).
      expect(mine.headers.get("x-request-id"), where).toMatch(/^[\w-]{36}$/);
      const withoutId = (text: string) => text.replace(/"requestId":"[\w-]+"/, "");
      expect(withoutId(await mine.text()), where).toBe(withoutId(await theirs.text()));
    }
  });

  it("reads Retry-After from a 503 and retries it, as with fetch", async () => {
    const broken = await served((request) => brokenApp().fetch(request));
    try {
      const client = clientOf(broken.url, { retries: 1, maxRetryDelayMs: 1 });
      const error = await failure(client.topics());
      expect(error).toMatchObject({ code: "redis_unavailable", status: 503 });
      expect(error.retryAfter).toBeGreaterThan(0);
    } finally {
      await close(broken.server);
    }
  });

  it("keeps the connection: sequential calls share one socket", async () => {
    const client = clientOf(service.url);
    const before = service.stats.connections;
    for (let i = 0; i < 10; i++) await client.topics();
    expect(service.stats.connections - before).toBe(1);
  });

  it("a server that never answers: the client's time limit aborts the request and closes it", async () => {
    let closed = 0;
    const silent = await plain((req) => req.socket.once("close", () => closed++));
    try {
      const client = clientOf(silent.url, { retries: 0, timeoutMs: 100 });
      const error = await failure(client.topics());
      expect(error).toMatchObject({ code: "timeout" });
      await expect.poll(() => closed).toBe(1);
    } finally {
      await close(silent.server);
    }
  });

  it("through the client, the caller's signal aborts a call in flight and closes its request", async () => {
    let closed = 0;
    const silent = await plain((req) => req.socket.once("close", () => closed++));
    try {
      const stop = new AbortController();
      const reason = new Error("caller gave up");
      const call = clientOf(silent.url, { retries: 0 }).pop("t", { signal: stop.signal });
      setTimeout(() => stop.abort(reason), 20);
      await expect(call).rejects.toBe(reason);
      await expect.poll(() => closed).toBe(1);
    } finally {
      await close(silent.server);
    }
  });

  it("the caller's signal aborts a call in flight with its reason, and one aborted before it starts", async () => {
    const silent = await plain(() => {});
    try {
      const send = nodeFetch();
      const stop = new AbortController();
      const call = send(`${silent.url}/x`, { method: "GET", signal: stop.signal });
      const reason = new Error("caller gave up");
      setTimeout(() => stop.abort(reason), 20);
      await expect(call).rejects.toBe(reason);
      await expect(send(`${silent.url}/x`, { method: "GET", signal: stop.signal })).rejects.toBe(
        reason,
      );
    } finally {
      await close(silent.server);
    }
  });

  it("a refused connection is a network_error naming it", async () => {
    const client = clientOf(`http://127.0.0.1:${await freePort()}`, { retries: 0 });
    const error = await failure(client.topics());
    expect(error.code).toBe("network_error");
    expect(error.message).toMatch(/ECONNREFUSED/);
  });

  it("decodes UTF-8 split across chunks inside a character, drops a BOM, joins repeated headers", async () => {
    const text = '{"s":"ü🎉"}';
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
    const split = await plain((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "set-cookie": ["a=1", "b=2"] });
      // Cut inside the four bytes of 🎉, flushed apart.
      res.write(bytes.subarray(0, bytes.length - 4));
      setTimeout(() => res.end(bytes.subarray(bytes.length - 4)), 20);
    });
    try {
      const reply = await nodeFetch()(`${split.url}/`, { method: "GET" });
      expect(await reply.text()).toBe(text);
      expect(reply.headers.get("set-cookie")).toBe("a=1, b=2");
      const theirs = await fetch(`${split.url}/`);
      expect(await theirs.text()).toBe(text);
    } finally {
      await close(split.server);
    }
  });

  it("speaks https, verifying the certificate: trusted through `ca`, refused without it", async () => {
    const certs = makeTestCerts();
    const { url, server } = await served((request) => t.app.fetch(request), {
      key: readFileSync(certs.key),
      cert: readFileSync(certs.cert),
    });
    try {
      const trusted = clientOf(url, { fetch: nodeFetch({ ca: readFileSync(certs.ca, "utf8") }) });
      const { job } = await trusted.add({ topic: "node-fetch-tls", body: { n: 1 } });
      expect((await trusted.get(job.id)).body).toEqual({ n: 1 });
      const untrusted = clientOf(url, { retries: 0 });
      const error = await failure(untrusted.topics());
      expect(error.code).toBe("network_error");
      expect(error.message).toMatch(/certificate/);
    } finally {
      await close(server);
      rmSync(certs.dir, { recursive: true, force: true });
    }
  });

  it("a long-poll outlasting keepAliveMs is not cut: that limit is for idle connections", async () => {
    const slow = await plain((_req, res) => {
      setTimeout(() => res.end('{"jobs":[]}'), 600);
    });
    try {
      const send = nodeFetch({ keepAliveMs: 100 });
      const reply = await send(`${slow.url}/v1/topics/t/pop`, { method: "POST", body: "{}" });
      expect(await reply.text()).toBe('{"jobs":[]}');
    } finally {
      await close(slow.server);
    }
  });

  it("follows no redirect: the error names where it points", async () => {
    const moved = await plain((_req, res) => {
      res.writeHead(308, { location: "https://delayq.example/v1/topics" });
      res.end();
    });
    try {
      const client = clientOf(moved.url);
      const error = await failure(client.topics());
      expect(error).toMatchObject({ code: "invalid_response", status: 308 });
      expect(error.message).toBe(
        "HTTP 308, a redirect to https://delayq.example/v1/topics: set the client's baseUrl to that address",
      );
    } finally {
      await close(moved.server);
    }
  });

  it("refuses options it cannot use, naming them", () => {
    for (const bad of [{ keepAliveMs: 0 }, { keepAliveMs: Number.NaN }, { maxSockets: -1 }]) {
      expect(() => nodeFetch(bad)).toThrow(
        /^nodeFetch: (keepAliveMs|maxSockets) must be a number > 0$/,
      );
    }
    expect(() => nodeFetch({ maxSockets: 2, keepAliveMs: 1 })).not.toThrow();
  });

  it("refuses what it cannot send: another scheme, a body that is not text", async () => {
    const send = nodeFetch();
    await expect(send("ftp://127.0.0.1/x", { method: "GET" })).rejects.toThrow(/not an http/);
    await expect(
      send(`${service.url}/health`, { method: "POST", body: new Uint8Array([1]) }),
    ).rejects.toThrow(/only text bodies/);
  });
});
