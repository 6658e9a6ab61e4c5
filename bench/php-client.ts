// The PHP client's cost per call with keep-alive (its default) and with `keepAlive: false` (a new
// TCP connection per call, as before 2026-11-27), alternating, against the service on one
// redis-server over TCP: one PHP process adding jobs one at a time (bench/php/calls.php).
// `npx tsx bench/php-client.ts [--calls 2000] [--reps 4]`
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs, promisify } from "node:util";
import { log } from "./lib/measure";
import { API_TOKEN, openStack } from "./single/stack";

const SCRIPT = fileURLToPath(new URL("./php/calls.php", import.meta.url));
const run = promisify(execFile);

const { values } = parseArgs({
  options: { calls: { type: "string", default: "2000" }, reps: { type: "string", default: "4" } },
});
const calls = Number(values.calls);
const reps = Number(values.reps);
if (!Number.isInteger(calls) || calls <= 0 || !Number.isInteger(reps) || reps <= 0) {
  throw new Error("--calls and --reps want positive integers");
}

const stack = await openStack("tcp");
try {
  const modes = { "keep-alive": "1", "a connection per call": "0" } as const;
  const results: Record<string, { wallMs: number; cpuMs: number }[]> = Object.fromEntries(
    Object.keys(modes).map((name) => [name, []]),
  );
  for (let rep = 0; rep < reps; rep++) {
    // Each repetition in the other order from the last: the shared machine's speed drifts.
    const order = Object.entries(modes);
    if (rep % 2) order.reverse();
    for (const [name, keepAlive] of order) {
      const { stdout } = await run("php", [SCRIPT], {
        env: {
          ...process.env,
          DELAYQ_URL: stack.service.url,
          DELAYQ_TOKEN: API_TOKEN,
          DELAYQ_KEEP_ALIVE: keepAlive,
          DELAYQ_CALLS: String(calls),
        },
      });
      results[name]?.push(JSON.parse(stdout) as { wallMs: number; cpuMs: number });
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  for (const [name, runs] of Object.entries(results)) {
    const wall = runs.map((r) => r.wallMs);
    const cpu = runs.map((r) => r.cpuMs);
    log(
      `${name}: ms per add, wall median ${median(wall).toFixed(3)} ` +
        `(${wall.map((x) => x.toFixed(3)).join(", ")}), PHP's CPU median ${median(cpu).toFixed(3)} ` +
        `(${cpu.map((x) => x.toFixed(3)).join(", ")})`,
    );
  }
} finally {
  await stack.close();
}
