// The scripts as one Redis function library (src/redis/lua/scripts/functions.ts), as the TCP
// driver runs them: on real redis-servers of their own, FCALL in place of EVALSHA, the library
// loaded when Redis lacks it, scripts again where Redis refuses functions, and no state kept
// from one call to the next. The engine suites run over the TCP driver too (the node-tcp project).
import { afterAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedisServer } from "../../dev/redis-server";
import { DelayQueue } from "../../src/index";
import { LUA_LIB } from "../../src/redis/lua/lib";
import { statementsOf } from "../../src/redis/lua/lib/shake";
import { SCRIPTS } from "../../src/redis/lua/scripts";
import { functionLibrary, perCall } from "../../src/redis/lua/scripts/functions";
import { connectRedis, type TcpRedis } from "../../src/redis/tcp";
import { expectError } from "../support/expect";
import { admin, commandCounts } from "../support/redis-admin";

const servers: RedisServer[] = [];
const connections: TcpRedis[] = [];
afterAll(async () => {
  await Promise.all(connections.map((connection) => connection.quit()));
  await Promise.all(servers.map((server) => server.stop()));
});

async function fresh(): Promise<RedisServer> {
  const server = await startRedisServer();
  servers.push(server);
  return server;
}

function connect(url: string): TcpRedis {
  const connection = connectRedis(url);
  connections.push(connection);
  return connection;
}

/** A job's life through the library: add, pop, finish; the job as `get` then tells it. */
async function lifecycle(queue: DelayQueue, topic: string) {
  const { job } = await queue.add({ topic, body: { n: 1 } });
  const [popped] = await queue.pop(topic, { count: 1 });
  expect(popped?.id).toBe(job.id);
  await queue.finish(job.id, { receipt: popped?.receipt });
  return queue.get(job.id);
}

describe("the scripts as a function library", () => {
  it("run through FCALL, the library loaded once, with the same commands inside", async () => {
    const server = await fresh();
    const queue = new DelayQueue({ redis: connect(`redis://127.0.0.1:${server.port}`) });
    expect(await lifecycle(queue, "f")).toMatchObject({ state: "finished" });
    expect(await lifecycle(queue, "f")).toMatchObject({ state: "finished" });
    const counted = await commandCounts(server.port);
    expect(counted.evalsha ?? 0).toBe(0);
    expect(counted.eval ?? 0).toBe(0);
    expect(counted["function|load"]).toBe(1);
    // add, pop, finish, get, twice, and the first call again: it found no function.
    expect(counted.fcall).toBe(9);
    // Inside them, what the scripts spend either way (test/engine/cost.test.ts): add SET, MGET,
    // ZADD; pop ZPOPMIN, MGET, ZADD; finish GET, ZREM, SET; get GET, ZSCORE (finished: none).
    expect(counted.zpopmin).toBe(2);
  });

  it("loads the library again when Redis lost it (FUNCTION FLUSH)", async () => {
    const server = await fresh();
    const queue = new DelayQueue({ redis: connect(`redis://127.0.0.1:${server.port}`) });
    await lifecycle(queue, "f");
    await admin(server.port, "FUNCTION", "FLUSH");
    expect(await lifecycle(queue, "f")).toMatchObject({ state: "finished" });
    expect((await commandCounts(server.port))["function|load"]).toBe(2);
  });

  it("go back to scripts where the Redis user may not use functions", async () => {
    const server = await fresh();
    await admin(server.port, "ACL", "SETUSER", "scripts", "on", ">pw", "~*", "&*", "+@all");
    await admin(server.port, "ACL", "SETUSER", "scripts", "-fcall", "-function");
    const queue = new DelayQueue({
      redis: connect(`redis://scripts:pw@127.0.0.1:${server.port}`),
    });
    expect(await lifecycle(queue, "s")).toMatchObject({ state: "finished" });
    expect(await lifecycle(queue, "s")).toMatchObject({ state: "finished" });
    const counted = await commandCounts(server.port);
    expect(counted["function|load"] ?? 0).toBe(0);
    // The first call was refused (not run); every call since is a script.
    expect(counted.evalsha).toBeGreaterThanOrEqual(7);
  });

  it("fail as scripts do: an error inside a function is internal_error", async () => {
    const server = await fresh();
    await admin(
      server.port,
      "FUNCTION",
      "LOAD",
      "#!lua name=broken\nredis.register_function('broken_index', function(keys, args) local x = nil; return x.y end)\nredis.register_function('broken_incr', function(keys, args) redis.call('SET', keys[1], 'text'); return redis.call('INCR', keys[1]) end)",
    );
    const functions = connect(`redis://127.0.0.1:${server.port}`).delayqFunctions;
    if (!functions) throw new Error("connectRedis gives no functions");
    await expectError(
      functions.call("broken_index", ["k"], []),
      "internal_error",
      /^A delayq script failed in Redis$/,
      /attempt to index/,
    );
    await expectError(
      functions.call("broken_incr", ["k"], []),
      "internal_error",
      /^A delayq script failed in Redis$/,
      /not an integer/,
    );
  });

  it("keep no state between calls: each name a function assigns is re-set on entry", () => {
    // Names the library defines once, at load: a function body that assigned one (or a field of
    // one) would carry that value into the next call, which a script never does.
    const once = new Set<string>();
    for (const statement of statementsOf(LUA_LIB)) {
      if (!perCall(statement.text)) for (const name of statement.defines) once.add(name);
    }
    const bodies = [
      ...statementsOf(LUA_LIB)
        .filter((s) => s.text.startsWith("local function "))
        .map((s) => s.text.slice(s.text.indexOf("\n"))),
      ...Object.values(SCRIPTS).map((script) => script.lua),
    ].map((lua) => lua.replace(/--\[(=*)\[[\s\S]*?\]\1\]/g, "").replace(/--.*$/gm, ""));
    const assigned: string[] = [];
    for (const body of bodies) {
      // Names the body declares itself (locals, parameters, loop variables) are its own.
      const own = new Set<string>();
      const declared = [
        /\blocal\s+function\s+(\w+)/g,
        /\blocal\s+([\w\s,]+?)\s*(?:=|\n|$)/g,
        /\bfunction\s*[\w.:]*\s*\(([^)]*)\)/g,
        /\bfor\s+([\w\s,]+?)\s+in\b/g,
        /\bfor\s+(\w+)\s*=/g,
      ];
      for (const pattern of declared) {
        for (const m of body.matchAll(pattern)) {
          for (const name of (m[1] as string).split(",")) own.add(name.trim());
        }
      }
      for (const m of body.matchAll(/(^|[^.\w])([A-Za-z_]\w*)\s*(\.\w+|\[[^\]\n]*\])?\s*=[^=]/g)) {
        const [, , name, field] = m;
        const before = body.slice(0, m.index + (m[1] as string).length);
        // A field of a table being built ({config = ...}), not an assignment.
        if ((before.match(/\{/g)?.length ?? 0) > (before.match(/\}/g)?.length ?? 0)) continue;
        if (own.has(name as string) || !once.has(name as string)) continue;
        if (name === "key" && field === undefined) continue;
        assigned.push(`${name}${field ?? ""}`);
      }
    }
    expect(assigned).toEqual([]);
  });

  it("is one library whose name changes with its text", () => {
    const library = functionLibrary();
    expect(library.text.startsWith(`#!lua name=${library.name}\n`)).toBe(true);
    for (const name of Object.keys(SCRIPTS)) {
      expect(library.text).toContain(
        `redis.register_function('${library.functionName(name as keyof typeof SCRIPTS)}'`,
      );
    }
    expect(library.name).toMatch(/^delayq_[0-9a-z]{11}$/);
  });
});
