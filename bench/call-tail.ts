// Where the longest script calls at 1M jobs spend their time (issue 12): delayq's add calls, each
// timed twice, by the server (SLOWLOG, every call over 1 ms) and inside the script (TIME at the
// start and end of its body), so that what is outside the body (argument and reply conversion,
// the Lua GC step Redis runs every 50 calls) shows apart; `--gc-stop` stops Lua's collector
// during the body (its debt is then paid outside it). `--plain` runs the same number of keys
// through a script that only SETs and RPUSHes them: the tail this server and machine give any
// script. `npx tsx bench/call-tail.ts [--jobs 1000000] [--gc-stop | --plain] [--per 100]`.
import { parseArgs } from "node:util";
import { startRedisServer } from "../dev/redis-server";
import { type Reply, RespConnection } from "../dev/resp";
import { DelayQueue } from "../src/index";
import { ADD_SLICE } from "../src/queue/add-batch";
import { connectRedis } from "../src/redis/tcp";
import { makeBody } from "./lib/workloads";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "1000000" },
    per: { type: "string", default: String(ADD_SLICE) },
    "gc-stop": { type: "boolean", default: false },
    plain: { type: "boolean", default: false },
  },
});
const jobs = Number(values.jobs);
const per = Number(values.per);
/** The add script ends with these lines (src/redis/lua/scripts/add.ts). */
const ADD_END = "table.insert(out, 1, pushed)\nreturn out";

/** A reply's items (an array's), or none. */
const items = (reply: Reply | undefined): Reply[] =>
  reply?.type === "array" ? (reply.value ?? []) : [];
/** A reply's text (a bulk's or a status's), or "". */
const text = (reply: Reply | undefined): string =>
  reply?.type === "bulk" || reply?.type === "status" ? String(reply.value ?? "") : "";

/** The slow log's EVALSHA entries: server µs and arguments. */
async function slowCalls(admin: RespConnection): Promise<{ us: number; args: string[] }[]> {
  const log: Reply = await admin.call("SLOWLOG", "GET", "1000000");
  const calls: { us: number; args: string[] }[] = [];
  for (const entry of items(log)) {
    const [, , duration, argv] = items(entry);
    const args = items(argv).map(text);
    const us = duration?.type === "integer" ? duration.value : Number.NaN;
    if (args[0]?.toLowerCase() === "evalsha") calls.push({ us, args });
  }
  return calls;
}

const stats = (name: string, xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const at = (p: number) => s[Math.floor((s.length - 1) * p)] ?? 0;
  const ms = (us: number) => (us / 1000).toFixed(1);
  console.log(
    `${name}: p50 ${ms(at(0.5))}, p99 ${ms(at(0.99))}, p99.9 ${ms(at(0.999))}, max ` +
      `${ms(at(1))} ms; over 10 ms: ${s.filter((us) => us > 10_000).length}`,
  );
};

const server = await startRedisServer();
const admin = await RespConnection.open(server.port);
const tcp = connectRedis(`redis://127.0.0.1:${server.port}`);
try {
  await admin.call("CONFIG", "SET", "slowlog-log-slower-than", "1000");
  await admin.call("CONFIG", "SET", "slowlog-max-len", "1000000");
  if (values.plain) {
    const script =
      "for i = 1, #ARGV, 2 do redis.call('SET', ARGV[i], ARGV[i + 1]) " +
      "redis.call('RPUSH', 'l:' .. (i % 7), ARGV[i]) end return #ARGV";
    const sha = text(await admin.call("SCRIPT", "LOAD", script));
    const value = "x".repeat(280);
    for (let i = 0; i < jobs; i += per) {
      const args: string[] = [];
      for (let j = 0; j < per; j++) args.push(`plain:j${i + j}`, `${value}${i + j}`);
      await tcp.ioredis.evalsha(sha, 0, ...args);
    }
    const calls = await slowCalls(admin);
    console.log(`${jobs / per} calls of ${per} SET + RPUSH; ${calls.length} over 1 ms`);
    stats(
      "server time",
      calls.map((call) => call.us),
    );
  } else {
    const stop = values["gc-stop"];
    // The add script with its body timed: TIME before and after, pushed with the call's first id.
    const timed = {
      get: (key: string) => tcp.get(key),
      createScript(script: string) {
        if (!script.trimEnd().endsWith(ADD_END)) return tcp.createScript(script);
        const body = script.trimEnd().slice(0, -"return out".length);
        return tcp.createScript(
          `${stop ? "collectgarbage('stop')\n" : ""}local tail0 = redis.call('TIME')\n${body}` +
            "local tail1 = redis.call('TIME')\n" +
            `${stop ? "collectgarbage('restart')\n" : ""}` +
            "redis.call('RPUSH', 'tail:add', ((tail1[1] - tail0[1]) * 1000000 + " +
            "(tail1[2] - tail0[2])) .. ':' .. ARGV[7])\nreturn out\n",
        );
      },
    };
    if (per !== ADD_SLICE) throw new Error(`--per is ${ADD_SLICE} for delayq (ADD_SLICE)`);
    const queue = new DelayQueue({ redis: timed, prefix: "tail", clock: () => 1_800_000_000_000 });
    for (let i = 0; i < jobs; i += 1000) {
      await queue.addBatch(
        Array.from({ length: Math.min(1000, jobs - i) }, (_, j) => ({
          topic: "backlog",
          id: `j${i + j}`,
          body: makeBody(i + j),
          delay: 3600 + ((i + j) % 3600),
        })),
      );
    }
    const bodies = new Map<string, number>();
    const listed: Reply = await admin.call("LRANGE", "tail:add", "0", "-1");
    for (const item of items(listed)) {
      const [us, first] = text(item).split(":");
      bodies.set(first ?? "", Number(us));
    }
    // ARGV[7], the call's first job id, sits after EVALSHA, the sha, numkeys and the keys.
    const rows = (await slowCalls(admin)).flatMap(({ us, args }) => {
      const body = bodies.get(args[3 + Number(args[2]) + 6] ?? "");
      return body === undefined ? [] : [{ us, body }];
    });
    console.log(
      `${Math.ceil(jobs / per)} add calls of ${per} jobs${stop ? ", Lua's GC stopped in the body" : ""}; ` +
        `${rows.length} over 1 ms`,
    );
    stats(
      "server time",
      rows.map((row) => row.us),
    );
    stats(
      "in the body",
      rows.map((row) => row.body),
    );
    stats(
      "outside it ",
      rows.map((row) => row.us - row.body),
    );
  }
} finally {
  await tcp.quit();
  admin.close();
  await server.stop();
}
