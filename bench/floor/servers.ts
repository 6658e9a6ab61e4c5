// The floor servers of bench/floor.ts, one per process: `node --import tsx servers.ts <kind>
// <port> [redisPort]` prints "ready" once it listens. Each answers POST /v1/jobs as an add would:
// it reads the whole body and answers a small JSON object.
//   node-http   node:http alone: no parsing, no Redis (what Node's HTTP server costs).
//   hono-fcall  Hono on @hono/node-server, the body parsed as JSON and stored by one FCALL over
//               ioredis (the least an add through delayq's stack could do).
import { createServer } from "node:http";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import IORedis from "ioredis";

const [kind, portText, redisPortText] = process.argv.slice(2);
const port = Number(portText);

if (kind === "node-http") {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const out = JSON.stringify({ created: true, bytes: Buffer.concat(chunks).length });
      res.writeHead(201, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(out),
      });
      res.end(out);
    });
  });
  server.listen(port, "127.0.0.1", () => console.log("ready"));
} else if (kind === "hono-fcall") {
  const redis = new IORedis({ port: Number(redisPortText), host: "127.0.0.1" });
  await redis.call(
    "FUNCTION",
    "LOAD",
    "REPLACE",
    "#!lua name=floor\nredis.register_function('floor_add', function(keys, args) " +
      "redis.call('SET', keys[1], args[1]) return 1 end)",
  );
  let next = 0;
  const app = new Hono();
  app.post("/v1/jobs", async (c) => {
    const text = await c.req.text();
    const job = JSON.parse(text) as { topic?: string };
    const id = `f${next++}`;
    await redis.call("FCALL", "floor_add", 1, `floor:${job.topic}:${id}`, text);
    return c.json({ created: true, id }, 201);
  });
  serve({ fetch: app.fetch, port, hostname: "127.0.0.1" }, () => console.log("ready"));
} else {
  console.error(`servers.ts: unknown kind ${kind}; want node-http or hono-fcall`);
  process.exit(2);
}
