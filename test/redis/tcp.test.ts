// The TCP driver (src/redis/tcp.ts) on real redis-servers: the REST driver's replies byte for byte,
// failures classified as the REST ones are, time limits kept, and a dead server never waited on.

import { mkdtempSync, rmSync } from "node:fs";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis as IORedis } from "ioredis";
import { afterAll, describe, expect, inject, it } from "vitest";
import { freePort, type RedisServer, startRedisServer } from "../../dev/redis-server";
import { RespConnection } from "../../dev/resp";
import { DelayQueue, DelayqError, tick } from "../../src/index";
import { keys } from "../../src/redis/keys";
import { connectRedis, type TcpRedis, tcpRedis } from "../../src/redis/tcp";
import { expectError } from "../support/expect";
import { testRedis } from "../support/redis";
import { admin, commandCounts } from "../support/redis-admin";

const servers: RedisServer[] = [];
const connections: TcpRedis[] = [];
/** Data directories made here (a server given one keeps it). */
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(connections.map((connection) => connection.quit()));
  for (const server of servers) server.process.kill("SIGCONT");
  await Promise.all(servers.map((server) => server.stop()));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A private redis-server: these tests stop, freeze and reconfigure theirs. */
async function server(extraArgs: string[] = []): Promise<RedisServer> {
  const started = await startRedisServer({ extraArgs });
  servers.push(started);
  return started;
}

function connect(url: string, commandTimeoutMs = 5000): TcpRedis {
  const connection = connectRedis(url, { commandTimeoutMs });
  connections.push(connection);
  return connection;
}

describe("replies", () => {
  // Bodies that break naive encodings: multi-byte UTF-8, astral planes, JSON escapes, separators.
  const BODIES = [
    "支付宝订单状态查询中",
    "é e\u0301 ß ﬀ",
    "🎉👩‍👩‍👧 𝄞",
    'quote " backslash \\ slash / tab \t newline \n',
    "\u2028\u2029\u0000\u001f",
    "w|a|q|not|meta\n{}",
    { nested: ["支付", 1.5, null, true, { ключ: "значение" }] },
    "12345678901234567890",
    "",
  ];

  it("are the REST driver's, byte for byte, for each kind of Lua reply", async () => {
    const rest = testRedis({ automaticDeserialization: false });
    const tcp = connect(`redis://127.0.0.1:${inject("redisPort")}`);
    const key = `${rest.prefix}k`;
    const scripts = [
      "return 'plain'",
      "return ARGV[1]",
      "return {ARGV[1], 42, -7, {ARGV[1], {}}, 'x'}",
      "return {1, nil, 3}",
      "return {1, false, true}",
      "return false",
      "return nil",
      "return 9007199254740993",
      "return 3.99",
      "return {ok='OK'}",
      "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])",
      "return redis.call('INCRBY', KEYS[1] .. ':n', 5)",
    ];
    for (const text of scripts) {
      for (const body of BODIES) {
        const arg = typeof body === "string" ? body : JSON.stringify(body);
        const overRest = await rest.redis.createScript(text).exec([key], [arg]);
        const overTcp = await tcp.createScript(text).exec([key], [arg]);
        if (text.includes("INCRBY")) {
          // Each call adds 5: the TCP call came second.
          expect(overTcp).toBe((overRest as number) + 5);
        } else {
          expect(overTcp, text).toStrictEqual(overRest);
        }
      }
    }
    expect(await tcp.get(key)).toBe(await rest.redis.get(key));
    expect(await tcp.get(`${rest.prefix}missing`)).toBeNull();
  });

  it("keep every job body intact: a queue over TCP and one over REST read the same records", async () => {
    const rest = testRedis({ automaticDeserialization: false });
    const tcp = connect(`redis://127.0.0.1:${inject("redisPort")}`);
    const prefix = rest.prefix.slice(0, -1);
    const clock = () => 1_800_000_000_000;
    const overTcp = new DelayQueue({ redis: tcp, prefix, clock });
    const overRest = new DelayQueue({ redis: rest.redis, prefix, clock });
    const jobs = BODIES.map((body, n) => ({ topic: "bodies", id: `b${n}`, body }));
    await overTcp.addBatch(jobs);
    for (const job of jobs) {
      const record = keys(prefix).job(job.id);
      const stored = await rest.redis.get(record);
      // `<meta>\n<body JSON>`, the body's UTF-8 as JSON.stringify writes it, nothing escaped.
      expect(stored).toEqual(expect.stringMatching(/^[^\n]+\n/));
      expect((stored as string).endsWith(`\n${JSON.stringify(job.body)}`)).toBe(true);
      expect(await tcp.get(record)).toBe(stored);
      expect((await overRest.get(job.id)).body).toStrictEqual(job.body);
    }
    const popped = await overTcp.pop("bodies", { count: BODIES.length });
    expect(popped.map((job) => job.body)).toStrictEqual(BODIES);
    for (const job of popped) await overTcp.finish(job.id, { receipt: job.receipt });
    expect((await overRest.get("b0")).state).toBe("finished");
  });

  it("runs a script Redis forgot (SCRIPT FLUSH) by EVAL once, then EVALSHA again", async () => {
    const redis = await server();
    const tcp = connect(`redis://127.0.0.1:${redis.port}`);
    const script = tcp.createScript("return ARGV[1] .. '!'");
    expect(await script.exec([], ["a"])).toBe("a!");
    await admin(redis.port, "SCRIPT", "FLUSH");
    const before = await commandCounts(redis.port);
    expect(await script.exec([], ["b"])).toBe("b!");
    expect(await script.exec([], ["c"])).toBe("c!");
    const after = await commandCounts(redis.port);
    expect((after.evalsha ?? 0) - (before.evalsha ?? 0)).toBe(2); // NOSCRIPT, then the third call
    expect((after.eval ?? 0) - (before.eval ?? 0)).toBe(1);
  });
});

describe("writes", () => {
  it("sends the commands issued in one turn of the loop in one write, FCALLs included, each answered", async () => {
    const tcp = connect(`redis://127.0.0.1:${inject("redisPort")}`);
    const echo = tcp.createScript("return ARGV[1]");
    expect(await echo.exec([], ["ready"])).toBe("ready"); // connected, the script loaded
    // A function library too: the service's own calls are FCALLs.
    const library = `tcpwrites${crypto.randomUUID().slice(0, 8)}`;
    const functions = tcp.delayqFunctions;
    if (!functions) throw new Error("connectRedis gives Redis Functions");
    await functions.load(
      `#!lua name=${library}\nredis.register_function('${library}_echo', function(keys, args) return args[1] end)`,
    );
    // Count the socket's writes: one per command written alone, one for a batch held together.
    const socket = tcp.ioredis.stream as Socket & {
      _write: (...args: unknown[]) => void;
      _writev: (...args: unknown[]) => void;
    };
    let writes = 0;
    for (const method of ["_write", "_writev"] as const) {
      const original = socket[method];
      socket[method] = function (this: Socket, ...args: unknown[]) {
        writes++;
        return original.apply(this, args);
      };
    }
    // One turn's commands, led by each way a command is issued (the first command of a turn is
    // the one that holds the socket's writes): one write a turn, every command answered.
    const turn = async (leader: () => Promise<unknown>, expected: unknown) => {
      const before = writes;
      const answers = await Promise.all([
        leader(),
        ...Array.from({ length: 4 }, (_, i) => echo.exec([], [`a${i}`])),
        tcp.get("tcp-writes-missing"),
      ]);
      expect(answers).toStrictEqual([expected, "a0", "a1", "a2", "a3", null]);
      expect(writes - before).toBe(1);
    };
    await turn(() => functions.call(`${library}_echo`, [], ["fcall"]), "fcall");
    await turn(() => echo.exec([], ["script"]), "script");
    await turn(() => tcp.get("tcp-writes-missing"), null);
    // A command of a later turn is not held back for the next ones: it goes in a write of its own.
    const before = writes;
    expect(await echo.exec([], ["later"])).toBe("later");
    expect(writes - before).toBe(1);
    await tcp.ioredis.call("FUNCTION", "DELETE", library);
  });
});

describe("failures", () => {
  it("a failing script is internal_error; a bad key type inside it too", async () => {
    const tcp = connect(`redis://127.0.0.1:${inject("redisPort")}`);
    const key = `tcp-err-${crypto.randomUUID()}`;
    await expectError(
      tcp.createScript("local x = nil; return x.y").exec([key], []),
      "internal_error",
      /^A delayq script failed in Redis$/,
      /attempt to index/,
    );
    await tcp.createScript("return redis.call('SET', KEYS[1], 'text')").exec([key], []);
    await expectError(
      tcp.createScript("return redis.call('INCR', KEYS[1])").exec([key], []),
      "internal_error",
      /^A delayq script failed in Redis$/,
      /not an integer/,
    );
  });

  it("a replica (READONLY, e.g. after a failover) is redis_unavailable, not a script bug", async () => {
    const primary = await server();
    const replica = await server(["--replicaof", "127.0.0.1", String(primary.port)]);
    const queue = new DelayQueue({ redis: connect(`redis://127.0.0.1:${replica.port}`) });
    const error = await expectError(
      queue.add({ topic: "t", id: "a" }),
      "redis_unavailable",
      /^Redis is unavailable \(READONLY\)$/,
      /^READONLY You can't write against a read only replica\.$/,
    );
    expect(error.status).toBe(503);
  });

  it("a server loading its data (LOADING) is redis_unavailable, with or without the ready check", async () => {
    const dir = mkdtempSync(join(tmpdir(), "delayq-loading-"));
    dirs.push(dir);
    const redis = await startRedisServer({ dir, extraArgs: ["--enable-debug-command", "yes"] });
    servers.push(redis);
    await admin(redis.port, "DEBUG", "POPULATE", "20000");
    await admin(redis.port, "SAVE");
    await redis.stop();
    // The same data, loaded at 100 µs per key: about 2 s of LOADING.
    const loading = await startRedisServer({
      dir,
      whileLoading: true,
      extraArgs: [
        "--dbfilename",
        "dump.rdb",
        "--key-load-delay",
        "100",
        "--loading-process-events-interval-bytes",
        "1024",
      ],
    });
    servers.push(loading);
    const raw = new IORedis({ port: loading.port, protocol: 2, enableReadyCheck: false });
    try {
      await expectError(
        tcpRedis(raw).get("k"),
        "redis_unavailable",
        /^Redis is unavailable \(LOADING\)$/,
        /^LOADING Redis is loading/,
      );
    } finally {
      raw.disconnect();
    }
    // connectRedis waits for the end of loading (ioredis's ready check), within its time limit.
    const started = Date.now();
    await expectError(
      connect(`redis://127.0.0.1:${loading.port}`, 300).get("k"),
      "redis_unavailable",
      /did not answer within DQ_REDIS_TIMEOUT_MS/,
    );
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it("a frozen server fails each command at the time limit with the REST driver's message, then recovers", async () => {
    const redis = await server();
    const queue = new DelayQueue({ redis: connect(`redis://127.0.0.1:${redis.port}`, 400) });
    await queue.add({ topic: "t", id: "before" });
    redis.process.kill("SIGSTOP");
    try {
      const started = Date.now();
      const results = await Promise.allSettled([
        queue.add({ topic: "t", id: "frozen" }),
        queue.get("before"),
        queue.pop("t"),
      ]);
      const elapsed = Date.now() - started;
      for (const result of results) {
        expect(result.status).toBe("rejected");
        const error = (result as PromiseRejectedResult).reason as DelayqError;
        expect(error).toBeInstanceOf(DelayqError);
        expect(error.code).toBe("redis_unavailable");
        expect(error.message).toMatch(
          /^Redis did not answer within DQ_REDIS_TIMEOUT_MS\. A write may still have been applied/,
        );
      }
      expect(elapsed).toBeGreaterThanOrEqual(350);
      expect(elapsed).toBeLessThan(1500);
    } finally {
      redis.process.kill("SIGCONT");
    }
    // The commands sent during the freeze were only given up on: the server runs them when it
    // resumes (as the message says, a write may have been applied), so the pop may have taken
    // the job. The queue works again either way.
    expect(["ready", "reserved"]).toContain((await queue.get("before")).state);
    expect((await queue.add({ topic: "t", id: "after" })).created).toBe(true);
  });

  it("a dead server fails fast instead of queueing, and the driver reconnects when it is back", async () => {
    const port = await freePort();
    const queue = new DelayQueue({ redis: connect(`redis://127.0.0.1:${port}`, 5000) });
    const started = Date.now();
    await expectError(
      queue.add({ topic: "t", id: "a" }),
      "redis_unavailable",
      // Where the server is, is for the log: the caller is told no address.
      /^Redis is unavailable$/,
      /^no connection to the server of REDIS_URL \(connect ECONNREFUSED 127\.0\.0\.1:\d+\)$/,
    );
    await expectError(
      queue.get("a"),
      "redis_unavailable",
      /^Redis is unavailable$/,
      /no connection/,
    );
    expect(Date.now() - started).toBeLessThan(2500); // far below the 5 s time limit
    const redis = await startRedisServer({ port });
    servers.push(redis);
    await expect
      .poll(
        () =>
          queue.ping().then(
            () => true,
            () => false,
          ),
        { timeout: 5000 },
      )
      .toBe(true);
    expect((await queue.add({ topic: "t", id: "a" })).created).toBe(true);
  });

  it("a refused password or a user without EVALSHA points at REDIS_URL, never quoting it", async () => {
    const redis = await server();
    await admin(redis.port, "CONFIG", "SET", "requirepass", "right-pw");
    const url = (auth: string) => `redis://${auth}@127.0.0.1:${redis.port}`;
    for (const auth of [":wrong-pw", "nobody:wrong-pw"]) {
      const error = await expectError(
        new DelayQueue({ redis: connect(url(auth)) }).get("a"),
        "redis_unavailable",
        /^Redis refused delayq's credentials$/,
        /^check the user name and password in REDIS_URL: WRONGPASS/,
      );
      expect(error.message).not.toContain("wrong-pw");
      expect(error.detail).not.toContain("wrong-pw");
    }
    const connection = await RespConnection.open(redis.port);
    await connection.call("AUTH", "right-pw");
    await connection.call("ACL", "SETUSER", "reader", "on", ">reader-pw", "~*", "+get");
    // docs/operating.md's ACL for a delayq user: its keys only, no dangerous commands.
    const acl = ["~{dq}*", "+@read", "+@write", "+@scripting", "-@dangerous", "+info", "+time"];
    await connection.call("ACL", "SETUSER", "delayq", "on", ">delayq-pw", ...acl);
    // Without TIME, scripts on Redis's clock cannot run: said as a missing permission (503).
    const noTime = acl.filter((rule) => rule !== "+time");
    await connection.call("ACL", "SETUSER", "notime", "on", ">notime-pw", ...noTime);
    connection.close();
    await expectError(
      new DelayQueue({ redis: connect(url("notime:notime-pw")) }).add({ topic: "t" }),
      "redis_unavailable",
      /^Redis refused a command delayq needs$/,
      /may not do what delayq needs \(.*TIME/,
    );
    const reader = new DelayQueue({ redis: connect(url("reader:reader-pw")) });
    for (const call of [reader.get("a"), reader.add({ topic: "t", id: "a" })]) {
      await expectError(
        call,
        "redis_unavailable",
        /^Redis refused a command delayq needs$/,
        /^The Redis user of REDIS_URL may not do what delayq needs/,
      );
    }
    const queue = new DelayQueue({ redis: connect(url(":right-pw")) });
    expect((await queue.add({ topic: "t", id: "a" })).created).toBe(true);
    const limited = new DelayQueue({ redis: connect(url("delayq:delayq-pw")), prefix: "dq" });
    await limited.add({ topic: "acl", id: "x", body: { n: 1 } });
    await limited.add({ topic: "acl", id: "y", runAt: Date.now() - 1 });
    expect((await tick(limited)).promoted).toBeGreaterThanOrEqual(0);
    const jobs = await limited.pop("acl", { count: 3 });
    expect(jobs.map((job) => job.id).sort()).toEqual(["x", "y"]);
    for (const job of jobs) await limited.finish(job.id, { receipt: job.receipt });
    expect((await limited.topic("acl")).counts).toMatchObject({ ready: 0, reserved: 0 });
    const other = new DelayQueue({ redis: connect(url("delayq:delayq-pw")), prefix: "other" });
    await expectError(
      other.add({ topic: "t" }),
      "redis_unavailable",
      /^Redis refused a command delayq needs$/,
      /may not do what delayq/,
    );
  });

  it("refuses a URL that is not redis:// or rediss://, never quoting it", () => {
    for (const url of [
      "https://default:pw-123@x.upstash.io",
      "localhost:6379",
      "redis://:pw-123@h/x",
    ]) {
      let error: unknown;
      try {
        connectRedis(url);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(DelayqError);
      expect((error as DelayqError).code).toBe("internal_error");
      expect((error as DelayqError).message).toMatch(/^delayq is misconfigured: REDIS_URL/);
      expect((error as DelayqError).message).not.toContain("pw-123");
    }
  });
});
