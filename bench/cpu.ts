// Service CPU per API request (issue 12): the single-job shape over HTTP (pop 1, or `--shape
// pop10many`: pop 10 with finishMany, where adds are 10 requests of 12) on REST and TCP,
// repeated, with the median; `--profile DIR` profiles the service (V8's sampling profiler) and
// summarises where its CPU went (bench/lib/cpu-profile.ts). `npx tsx bench/cpu.ts --reps 3`.
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { printProfileSummary } from "./lib/cpu-profile";
import { log, median } from "./lib/measure";
import { singleRun } from "./single/shape";
import { type Driver, openStack, SINGLE_DEFAULTS } from "./single/stack";

// NODE_OPTIONS cannot carry --cpu-prof; this preload starts the same profiler from inside.
const PRELOAD = fileURLToPath(new URL("./lib/cpu-profile-preload.mjs", import.meta.url));

const { values } = parseArgs({
  options: {
    driver: { type: "string", default: "rest,tcp" },
    jobs: { type: "string", default: "1500" },
    reps: { type: "string", default: "3" },
    // Lifecycles before each repetition (0: a fresh process's first requests, V8 still compiling).
    warmup: { type: "string", default: String(SINGLE_DEFAULTS.warmup) },
    profile: { type: "string" },
    shape: { type: "string", default: "pop1" },
  },
});
const SHAPES = { pop1: [1, "each"], pop10many: [10, "many"] } as const;
const shape = SHAPES[values.shape as keyof typeof SHAPES];
if (!shape) throw new Error(`--shape wants one of ${Object.keys(SHAPES).join(", ")}`);

const drivers = (values.driver ?? "").split(",") as Driver[];
const jobs = Number(values.jobs);
const reps = Number(values.reps);
const warmup = Number(values.warmup);
if (!Number.isInteger(jobs) || jobs <= 0 || !Number.isInteger(reps) || reps <= 0) {
  throw new Error("--jobs and --reps want positive integers");
}
if (!Number.isInteger(warmup) || warmup < 0) throw new Error("--warmup wants an integer ≥ 0");
const options = { ...SINGLE_DEFAULTS, jobs, warmup };

/** CPU ticks (10 ms) of a process's threads: the main thread's user and system time, the rest. */
function threadTicks(pid: number): { user: number; system: number; others: number } {
  const ticks = { user: 0, system: 0, others: 0 };
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    } catch {
      continue; // the thread ended
    }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const [user, system] = [Number(fields[11]), Number(fields[12])];
    if (Number(tid) === pid) {
      ticks.user += user;
      ticks.system += system;
    } else ticks.others += user + system;
  }
  return ticks;
}

const summary: string[] = [];
for (const driver of drivers) {
  const dir = values.profile && resolve(values.profile, driver);
  if (dir) mkdirSync(dir, { recursive: true });
  const env: Record<string, string> = dir
    ? { NODE_OPTIONS: `--import ${PRELOAD}`, DQ_CPU_PROFILE_DIR: dir }
    : {};
  const stack = await openStack(driver, env);
  const perRequest: number[] = [];
  // The profile's clock is the monotonic one: leave the service's start-up out of the summary.
  const fromUs = Number(process.hrtime.bigint() / 1000n);
  try {
    for (let rep = 0; rep < reps; rep++) {
      const pid = stack.service.child.pid ?? 0;
      const before = threadTicks(pid);
      const run = await singleRun(stack, "http", shape[0], options, shape[1]);
      const after = threadTicks(pid);
      const ms = run.serviceCpuMsPerRequest ?? Number.NaN;
      perRequest.push(ms);
      // Ticks are 10 ms: per request, ms = ticks × 10 / requests.
      const per = (a: number, b: number) => (((b - a) * 10) / run.apiRequests).toFixed(3);
      log(
        `${driver} rep ${rep + 1}: ${ms.toFixed(3)} CPU ms/request over ${run.apiRequests} ` +
          `requests (main thread user ${per(before.user, after.user)}, system ` +
          `${per(before.system, after.system)}, other threads ${per(before.others, after.others)}), ` +
          `${run.restRequestsPerJob?.toFixed(2) ?? "-"} REST requests/job, ` +
          `${run.lifecyclesPerSec.toFixed(0)} jobs/s`,
      );
    }
  } finally {
    await stack.close();
  }
  const line =
    `${driver.toUpperCase()}: CPU ms/request median ${median(perRequest).toFixed(3)} ` +
    `(runs ${perRequest.map((ms) => ms.toFixed(3)).join(", ")})`;
  summary.push(line);
  if (dir) {
    const files = readdirSync(dir).filter((file) => file.endsWith(".cpuprofile"));
    for (const file of files) printProfileSummary(join(dir, file), fromUs);
  }
}
for (const line of summary) console.log(line);
