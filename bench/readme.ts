// Writes the benchmark's tables into docs/benchmarks.md from a results JSON, so the numbers there
// all come from one run: `npx tsx bench/readme.ts [bench/results/latest.json]`, or
// `npm run bench -- --readme` after a run. Each table sits between `<!-- bench:NAME -->` and
// `<!-- /bench:NAME -->`; the prose around them is the page's own.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import {
  cryptoTable,
  fmt,
  herdTable,
  idleTable,
  machineLine,
  paymentsTable,
  pushTables,
  singleTables,
  systemsTable,
} from "./lib/tables";
import type { Attribution, ScaleResult } from "./scale";

const PAGE = fileURLToPath(new URL("../docs/benchmarks.md", import.meta.url));
const RESULTS = fileURLToPath(new URL("./results/latest.json", import.meta.url));

type Json = Record<string, unknown>;

function scaleLine(value: unknown): string {
  if (!value) return "_not run_";
  if (typeof value === "object" && value !== null && "error" in value) {
    return `_D scale failed: ${String((value as { error: unknown }).error)}_`;
  }
  const d = value as ScaleResult;
  const over = Object.entries(d.callsOver10ms)
    .map(([name, n]) => `${n} ${name}`)
    .join(", ");
  return (
    `**D, scale** (delayq, ${fmt(d.jobs)} delayed jobs with ~105-byte bodies, due over the ` +
    `second hour from now): ${fmt(d.bytesPerJob)} bytes per job in Redis ` +
    `(**${fmt(d.bytesPerJobBeyondBody)} beyond the body**); added at ${fmt(d.addJobsPerSec)} ` +
    `jobs/s in batches of 1000; once all due, ticks drained the backlog in ` +
    `${fmt(d.drainSeconds, 1)} s (${fmt(d.tickSlices)} slices, ${fmt(d.drainJobsPerSec)} jobs/s); ` +
    `the longest single call took ${fmt(d.longestCallMs, 1)} ms; calls over 10 ms: ` +
    `${over || "none"}.${soonNote(d)}${growthNote(d)}`
  );
}

/** A backlog due within 20 minutes (older results lack it). */
function soonNote(d: ScaleResult): string {
  if (!d.soon) return "";
  const share = (100 * d.soon.inBucket) / d.soon.jobs;
  return (
    ` ${fmt(d.soon.jobs)} jobs due over the next 20 minutes instead: ` +
    `**${fmt(d.soon.bytesPerJobBeyondBody)} bytes per job beyond the body** ` +
    `(${fmt(share)} % of them, those due within about 2 minutes, in the delay bucket).`
  );
}

/** Whether the slow calls were a hash table doubling (older results lack the split). */
function growthNote(d: ScaleResult): string {
  const part = (what: string, table: string, g: Attribution | undefined) =>
    g
      ? ` ${what} over 10 ms (server time): ${fmt(g.over10ms)}, of which ${fmt(g.over10msAtTableGrowth)} ` +
        `during one of the ${fmt(g.atTableGrowth)} in which ${table} doubled (longest of those ` +
        `${fmt(g.longestAtTableGrowthMs, 1)} ms); the others took ${fmt(g.medianOtherMs, 1)} ms ` +
        `at the median, ${fmt(g.longestOtherMs, 1)} ms at most.`
      : "";
  return (
    part(`Add calls (${d.addSlice ?? 250} jobs each)`, "the keyspace's hash table", d.addCalls) +
    part("Drain slices", "the ready list's hash table", d.drainSlices)
  );
}

/** The blocks this script owns, by name. */
export function readmeBlocks(json: Json): Record<string, string> {
  return {
    machine: machineLine(json, false),
    systems: systemsTable(json),
    scale: scaleLine(json.scale),
    single: singleTables(json.single),
    herd: herdTable(json.single),
    idle: idleTable(json.idle),
    push: pushTables(json.push),
    payments: paymentsTable(json.payments),
    crypto: cryptoTable(json.paymentsCrypto),
  };
}

/** Replaces each block present in docs/benchmarks.md; answers what it did. */
export function updateReadme(json: Json, path = PAGE): string {
  let text = readFileSync(path, "utf8");
  const written: string[] = [];
  const missing: string[] = [];
  for (const [name, body] of Object.entries(readmeBlocks(json))) {
    const open = `<!-- bench:${name} -->`;
    const close = `<!-- /bench:${name} -->`;
    const from = text.indexOf(open);
    const to = text.indexOf(close);
    if (from < 0 || to < from) {
      missing.push(name);
      continue;
    }
    text = `${text.slice(0, from + open.length)}\n${body}\n${text.slice(to)}`;
    written.push(name);
  }
  writeFileSync(path, text);
  return (
    `docs/benchmarks.md: wrote ${written.join(", ") || "nothing"}` +
    (missing.length > 0 ? `; no markers for ${missing.join(", ")}` : "")
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const from = process.argv[2] ?? RESULTS;
  console.log(updateReadme(JSON.parse(readFileSync(from, "utf8")) as Json));
}
