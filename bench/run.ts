// The benchmark: delayq (library, HTTP on Node, HTTP in wrangler dev) and its peers (BullMQ,
// bee-queue, rsmq) on the same workloads, each on a fresh redis-server; then delayq at scale; the
// single-job shape, the herd and idle consumers (with ouqiang/delay-queue when
// OUQIANG_DELAY_QUEUE_BIN names a built binary); push topics (P); payment watches (W); and the
// payment providers' signing cost; a burst past one invocation's subrequests, handed off through
// QStash, and failure notices (burst); topics spread over a local Redis Cluster's masters against
// one redis-server (cluster). `npm run bench` (about 45 min) or `npm run bench -- --quick`
// (about 5 min); `--only delayq,single,push` picks parts; `--out FILE` writes the results there
// instead of bench/results/latest.json (the docs' run); `--readme` rewrites docs' tables.
// W's own: `--watches N`, `--speedup N`, `--subrequests N` (DQ_SUBREQUESTS, 10,000 by default),
// `--no-hand-offs` (no QStash: what a budget leaves waits for the next tick), `--cpu-polls N` (polls
// a round of the CPU measurement in workerd and functions/node.ts; 0 skips it).
import { spawnSync } from "node:child_process";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { BURST_DEFAULTS, BURST_QUICK, runBurst } from "./burst";
import { CLUSTER_DEFAULTS, CLUSTER_QUICK, runCluster } from "./cluster";
import { delayqHttpNode, delayqHttpWrangler, delayqLibrary } from "./delayq";
import { log } from "./lib/measure";
import { machineInfo, markdownTable, methodNotes, resultJson, writeJson } from "./lib/report";
import { newTables } from "./lib/tables";
import type { SystemAdapter } from "./lib/types";
import { type BenchOptions, DEFAULT_OPTIONS, QUICK_OPTIONS, runSystems } from "./lib/workloads";
import { PAYMENTS_DEFAULTS, PAYMENTS_QUICK, runPayments } from "./payments";
import { measurePaymentsCrypto } from "./payments-crypto";
import { beeQueue } from "./peers/bee-queue";
import { bullmq } from "./peers/bullmq";
import { rsmq, rsmqFastPoll } from "./peers/rsmq";
import { PUSH_DEFAULTS, PUSH_QUICK, runPush } from "./push";
import { updateReadme } from "./readme";
import { runScale, type ScaleResult } from "./scale";
import { runIdleSingle, runSingle, SINGLE_DEFAULTS, SINGLE_QUICK } from "./single";

const SYSTEMS: readonly SystemAdapter[] = [
  delayqLibrary,
  delayqHttpNode,
  delayqHttpWrangler,
  bullmq,
  beeQueue,
  rsmq,
];
/** Variants run only when named with --only. */
const VARIANTS: readonly SystemAdapter[] = [rsmqFastPoll];

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    n: { type: "string" },
    "scale-jobs": { type: "string" },
    "idle-seconds": { type: "string" },
    only: { type: "string" },
    "no-scale": { type: "boolean", default: false },
    watches: { type: "string" },
    speedup: { type: "string" },
    subrequests: { type: "string" },
    "no-hand-offs": { type: "boolean", default: false },
    "cpu-polls": { type: "string" },
    readme: { type: "boolean", default: false },
    out: { type: "string" },
  },
});

const positive = (flag: string, text: string) => {
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${flag} wants a positive integer`);
  return value;
};

const options: BenchOptions = { ...(values.quick ? QUICK_OPTIONS : DEFAULT_OPTIONS) };
if (values.n !== undefined) {
  options.jobs = positive("n", values.n);
  options.monitorJobs = Math.max(1, Math.round(options.jobs / 10));
}
if (values["idle-seconds"] !== undefined) {
  options.idleMs = positive("idle-seconds", values["idle-seconds"]) * 1000;
}
const scaleJobs =
  values["scale-jobs"] !== undefined
    ? positive("scale-jobs", values["scale-jobs"])
    : values.quick
      ? 50_000
      : 1_000_000;
const only = values.only?.split(",");
const OUTPUT = values.out ?? fileURLToPath(new URL("./results/latest.json", import.meta.url));
/** The parts after the systems' table, each its own name for --only. */
const PARTS = [
  "scale",
  "single",
  "idle",
  "push",
  "burst",
  "payments",
  "crypto",
  "cluster",
] as const;
const wants = (part: (typeof PARTS)[number]) => !only || only.includes(part);
const systems = only
  ? [...SYSTEMS, ...VARIANTS].filter((system) => only.includes(system.name))
  : SYSTEMS;
if (systems.length === 0 && !PARTS.some((part) => only?.includes(part))) {
  const names = [...SYSTEMS, ...VARIANTS].map((system) => system.name).join(", ");
  throw new Error(`--only matched nothing; known: ${names}, ${PARTS.join(", ")}`);
}
const singleOptions = { ...(values.quick ? SINGLE_QUICK : SINGLE_DEFAULTS) };
if (values["idle-seconds"] !== undefined) singleOptions.idleMs = options.idleMs;
const pushOptions = { ...(values.quick ? PUSH_QUICK : PUSH_DEFAULTS) };
const paymentsOptions = { ...(values.quick ? PAYMENTS_QUICK : PAYMENTS_DEFAULTS) };
if (values.watches !== undefined) paymentsOptions.watches = positive("watches", values.watches);
if (values.speedup !== undefined) paymentsOptions.speedup = positive("speedup", values.speedup);
if (values.subrequests !== undefined) {
  paymentsOptions.subrequests = positive("subrequests", values.subrequests);
}
if (values["no-hand-offs"]) paymentsOptions.handOffs = false;
if (values["cpu-polls"] !== undefined) {
  paymentsOptions.cpuPolls =
    values["cpu-polls"] === "0" ? 0 : positive("cpu-polls", values["cpu-polls"]);
}

/** The commit measured, and whether the code under test had changes not yet committed. */
function revision(): { commit: string; uncommittedChanges: boolean } {
  const git = (...args: string[]) =>
    spawnSync("git", args, {
      encoding: "utf8",
      cwd: fileURLToPath(new URL("..", import.meta.url)),
    }).stdout?.trim() ?? "";
  return {
    commit: git("rev-parse", "--short", "HEAD") || "unknown",
    uncommittedChanges: git("status", "--porcelain", "--", "src", "functions", "dev") !== "",
  };
}

// Every child (redis-server, bridge, service, sandbox) is killed if the benchmark exits early;
// several stacks run at once, each with its children's exit listeners.
process.setMaxListeners(100);

// A library that rejects a promise nobody awaits must not end the run for the other systems.
const strays: string[] = [];
process.on("unhandledRejection", (reason) => {
  const text = reason instanceof Error ? reason.message : String(reason);
  strays.push(text);
  log(`unhandled rejection: ${text}`);
});

const started = Date.now();
const loadAtStart = loadavg();
const results = await runSystems(systems, options);
let scale: ScaleResult | { error: string } | undefined;
if (!values["no-scale"] && wants("scale")) {
  log(`delayq D: ${scaleJobs} delayed jobs`);
  scale = await runScale(scaleJobs).catch((error: unknown) => ({ error: String(error) }));
}
const failed = (part: string) => (error: unknown) => {
  log(`${part} failed: ${String(error)}`);
  return { error: String(error) };
};
const single = wants("single") ? await runSingle(singleOptions).catch(failed("single")) : undefined;
// Idle consumers cost no CPU to speak of and their counts do not depend on it: they run beside P.
let idle: Awaited<ReturnType<typeof runIdleSingle>> | { error: string } | undefined;
const idleRun = async () => {
  idle = await runIdleSingle(singleOptions).catch(failed("idle"));
};
const push = wants("push")
  ? await runPush(pushOptions, wants("idle") ? idleRun : undefined).catch(failed("push"))
  : undefined;
if (!wants("push") && wants("idle")) await idleRun();
const burst = wants("burst")
  ? await runBurst(values.quick ? BURST_QUICK : BURST_DEFAULTS).catch(failed("burst"))
  : undefined;
const payments = wants("payments")
  ? await runPayments(paymentsOptions).catch(failed("payments"))
  : undefined;
const crypto = wants("crypto")
  ? await measurePaymentsCrypto(values.quick ? 100 : 500).catch(failed("crypto"))
  : undefined;
const cluster = wants("cluster")
  ? await runCluster(values.quick ? CLUSTER_QUICK : CLUSTER_DEFAULTS).catch(failed("cluster"))
  : undefined;
const mode = values.quick ? "quick" : "default";

const json: Record<string, unknown> = {};
for (const result of results) json[result.name] = resultJson(result);
if (scale) json.scale = scale;
if (single) json.single = single;
if (idle) json.idle = idle;
if (push) json.push = push;
if (burst) json.burst = burst;
if (payments) json.payments = payments;
if (crypto) json.paymentsCrypto = crypto;
if (cluster) json.cluster = cluster;
json.machine = {
  ...machineInfo(options, mode),
  scaleJobs,
  unhandledRejections: strays,
  loadAverage: { atStart: loadAtStart, atEnd: loadavg() },
  runSeconds: Math.round((Date.now() - started) / 1000),
  ...revision(),
};
writeJson(OUTPUT, json);

console.log(markdownTable(results));
console.log();
if (scale && "error" in scale) console.log(`D scale failed: ${scale.error}`);
else if (scale) {
  const over = Object.entries(scale.callsOver10ms)
    .map(([name, n]) => `${n} ${name}`)
    .join(", ");
  console.log(
    `D scale (delayq, ${scale.jobs} delayed jobs): ${scale.bytesPerJob.toFixed(0)} B/job ` +
      `(${scale.bytesPerJobBeyondBody.toFixed(0)} beyond the body), added at ` +
      `${Math.round(scale.addJobsPerSec)} jobs/s in batches of 1000, drained by ticks in ` +
      `${scale.drainSeconds.toFixed(1)} s (${Math.round(scale.drainJobsPerSec)} jobs/s, ` +
      `${scale.tickSlices} slices), longest call ${scale.longestCallMs.toFixed(1)} ms, ` +
      `calls over 10 ms: ${over || "none"}.`,
  );
}
console.log();
console.log(methodNotes(results, options));
for (const stray of strays) console.log(`- unhandled rejection during the run: ${stray}`);
console.log();
console.log(newTables(json));
log(`done in ${Math.round((Date.now() - started) / 1000)} s; wrote ${OUTPUT}`);
if (values.readme) log(updateReadme(json));

// Only fires when some client was left open and keeps the process alive.
setTimeout(() => {
  log(`still running, open handles: ${process.getActiveResourcesInfo().join(", ")}`);
}, 5000).unref();
