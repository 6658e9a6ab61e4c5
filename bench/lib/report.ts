// Turns benchmark results into the markdown table, the notes under it, and the results JSON.
import { spawnSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { arch, cpus, release, totalmem, type } from "node:os";
import { dirname } from "node:path";
import { writeFileAtomic } from "../../dev/atomic-file";
import { findRedisServer } from "../../dev/redis-server";
import type { BenchOptions, SystemResult } from "./workloads";

const fixed = (value: number | undefined, digits: number) =>
  value === undefined || !Number.isFinite(value) ? "error" : value.toFixed(digits);

const whole = (value: number | undefined) =>
  value === undefined || !Number.isFinite(value) ? "error" : String(Math.round(value));

export function markdownTable(results: readonly SystemResult[]): string {
  const lines = [
    "| system | cmds/job | requests/job | jobs/s (consume) | jobs/s (whole) | lateness min / p50 / p99 / max ms | idle cmds/min |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ];
  for (const result of results) {
    const { lifecycle, requests, lateness, idle } = result;
    const late = !lateness
      ? "error"
      : lateness.count === 0
        ? "none delivered"
        : [lateness.min, lateness.p50, lateness.p99, lateness.max].map(whole).join(" / ") +
          (lateness.missing > 0 ? ` (${lateness.missing} missing)` : "");
    lines.push(
      `| ${result.name} | ${fixed(lifecycle?.cmdsPerJob, 2)} | ${fixed(requests?.requestsPerJob, 2)}` +
        ` | ${whole(lifecycle?.consumeJobsPerSec)} | ${whole(lifecycle?.wholeJobsPerSec)}` +
        ` | ${late} | ${whole(idle?.cmdsPerMinute)} |`,
    );
  }
  return lines.join("\n");
}

/** How each column was measured, the adapters' own notes, and every error. */
export function methodNotes(results: readonly SystemResult[], options: BenchOptions): string {
  const lines = [
    `- cmds/job: INFO commandstats delta (commands run inside Lua included, the harness's own ` +
      `INFO excluded) over adding ${options.jobs} jobs in batches of ${options.batchSize} and ` +
      `consuming them with concurrency ${options.concurrency}, divided by ${options.jobs}.`,
    `- requests/job: commands clients sent over the wire (MONITOR lines not from Lua), in a ` +
      `separate run of ${options.monitorJobs} jobs with MONITOR attached; MONITOR costs ` +
      `throughput, so jobs/s come from the run without it.`,
    "- jobs/s (consume): jobs / time from starting the consumers (after all jobs were added) to " +
      "the last job handed over; (whole) also counts the adding.",
    `- lateness: received − due in ms for ${options.latenessJobs} jobs due uniformly over ` +
      `${options.latenessSpanMs / 1000} s while consumers run; negative means delivered early ` +
      "(p95 and the number of early jobs are in the JSON).",
    `- idle cmds/min: one consumer and the system's timers on an empty queue, commands over a ` +
      `${options.idleMs / 1000} s window (opened ${options.idleSettleMs / 1000} s after the ` +
      "consumer started) scaled to a minute; a timer slower than the window may or may not " +
      "fall inside it. The systems idle side by side, each on its own redis-server.",
  ];
  for (const result of results) {
    for (const note of result.notes) lines.push(`- ${result.name}: ${note}`);
    if (result.lateness && result.lateness.early > 0) {
      lines.push(
        `- ${result.name}: ${result.lateness.early} of ${result.lateness.count} jobs were ` +
          "delivered before they were due.",
      );
    }
    const requests = result.requests;
    if (requests) {
      // MONITOR and INFO commandstats watch the same window; they should agree.
      const seen = requests.clientCmdsPerJob + requests.luaCmdsPerJob;
      if (Math.abs(seen - requests.cmdsPerJob) > 0.01 * requests.cmdsPerJob) {
        lines.push(
          `- ${result.name}: MONITOR saw ${seen.toFixed(2)} commands/job but commandstats ` +
            `counted ${requests.cmdsPerJob.toFixed(2)}.`,
        );
      }
    }
    for (const [workload, error] of Object.entries(result.errors)) {
      lines.push(`- ${result.name}: **${workload} failed**: ${error}`);
    }
  }
  return lines.join("\n");
}

export function redisVersion(): string {
  try {
    const output = spawnSync(findRedisServer(), ["--version"], { encoding: "utf8" }).stdout;
    return /v=(\S+)/.exec(output)?.[1] ?? output.trim();
  } catch {
    return "unknown";
  }
}

export function machineInfo(options: BenchOptions, mode: string) {
  const cpu = cpus();
  return {
    os: `${type()} ${release()} ${arch()}`,
    cpu: cpu[0]?.model ?? "unknown",
    cores: cpu.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    redis: redisVersion(),
    date: new Date().toISOString(),
    settings: { mode, ...options },
  };
}

/** The JSON entry of one system: the headline numbers first, everything measured after. */
export function resultJson(result: SystemResult) {
  const { lifecycle, requests, lateness, idle } = result;
  return {
    cmdsPerJob: lifecycle?.cmdsPerJob ?? null,
    requestsPerJob: requests?.requestsPerJob ?? null,
    jobsPerSec: lifecycle?.consumeJobsPerSec ?? null,
    jobsPerSecWhole: lifecycle?.wholeJobsPerSec ?? null,
    lateness: lateness
      ? {
          min: lateness.min,
          p50: lateness.p50,
          p95: lateness.p95,
          p99: lateness.p99,
          max: lateness.max,
        }
      : null,
    idleCmdsPerMinute: idle?.cmdsPerMinute ?? null,
    errors: result.errors,
    notes: result.notes,
    details: { lifecycle, requests, lateness, idle },
  };
}

/** Writes through a temporary file, so a reader never sees half a result. */
export function writeJson(path: string, value: unknown): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`, 0o644);
}
