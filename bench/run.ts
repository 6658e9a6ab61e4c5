// The benchmark: delayq (library, HTTP on Node, HTTP in wrangler dev) and its peers (BullMQ,
// bee-queue, rsmq) on the same workloads, each on a fresh redis-server; then delayq at scale.
// `npm run bench` (about 10 min) or `npm run bench -- --quick` (under 2 min).
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { delayqHttpNode, delayqHttpWrangler, delayqLibrary } from "./delayq";
import { log } from "./lib/measure";
import { machineInfo, markdownTable, methodNotes, resultJson, writeJson } from "./lib/report";
import type { SystemAdapter } from "./lib/types";
import { type BenchOptions, DEFAULT_OPTIONS, QUICK_OPTIONS, runSystems } from "./lib/workloads";
import { beeQueue } from "./peers/bee-queue";
import { bullmq } from "./peers/bullmq";
import { rsmq, rsmqFastPoll } from "./peers/rsmq";
import { runScale, type ScaleResult } from "./scale";

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
const OUTPUT = fileURLToPath(new URL("./results/latest.json", import.meta.url));

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    n: { type: "string" },
    "scale-jobs": { type: "string" },
    "idle-seconds": { type: "string" },
    only: { type: "string" },
    "no-scale": { type: "boolean", default: false },
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
const systems = only
  ? [...SYSTEMS, ...VARIANTS].filter((system) => only.includes(system.name))
  : SYSTEMS;
if (systems.length === 0 && !only?.includes("scale")) {
  const names = [...SYSTEMS, ...VARIANTS].map((system) => system.name).join(", ");
  throw new Error(`--only matched no system; known: ${names}, scale`);
}

// A library that rejects a promise nobody awaits must not end the run for the other systems.
const strays: string[] = [];
process.on("unhandledRejection", (reason) => {
  const text = reason instanceof Error ? reason.message : String(reason);
  strays.push(text);
  log(`unhandled rejection: ${text}`);
});

const started = Date.now();
const results = await runSystems(systems, options);
let scale: ScaleResult | { error: string } | undefined;
if (!values["no-scale"] && (!only || only.includes("scale"))) {
  log(`delayq D: ${scaleJobs} delayed jobs`);
  scale = await runScale(scaleJobs).catch((error: unknown) => ({ error: String(error) }));
}
const mode = values.quick ? "quick" : "default";

const json: Record<string, unknown> = {};
for (const result of results) json[result.name] = resultJson(result);
if (scale) json.scale = scale;
json.machine = { ...machineInfo(options, mode), scaleJobs, unhandledRejections: strays };
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
log(`done in ${Math.round((Date.now() - started) / 1000)} s; wrote ${OUTPUT}`);

// Only fires when some client was left open and keeps the process alive.
setTimeout(() => {
  log(`still running, open handles: ${process.getActiveResourcesInfo().join(", ")}`);
}, 5000).unref();
