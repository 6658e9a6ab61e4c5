// Markdown tables of the results JSON (bench/results/latest.json): printed after a run, and
// written into docs/benchmarks.md by bench/readme.ts, so both come from one run.
import type { BurstResult, BurstRun } from "../burst";
import type { PaymentsResult } from "../payments";
import type { CryptoResult } from "../payments-crypto";
import type { LatenessGroup, PushResult } from "../push";
import type { IdleResult, PairRun, SingleResult, SingleRun } from "../single";
import { median } from "./measure";

type Json = Record<string, unknown>;

const num = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined;

/** A number with `digits` decimals and thousands separators; "–" when there is none. */
export function fmt(value: unknown, digits = 0): string {
  const n = num(value);
  if (n === undefined) return "–";
  return n.toLocaleString("en-US", {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

const ms = (value: unknown) => fmt(value, 0);

function table(header: readonly string[], align: readonly ("l" | "r")[], rows: string[][]) {
  return [
    `| ${header.join(" | ")} |`,
    `|${align.map((a) => (a === "l" ? "---" : "---:")).join("|")}|`,
    ...rows.map((row) => `| ${row.join(" | ")} |`),
  ].join("\n");
}

const hasError = (value: unknown): value is { error: string } =>
  typeof value === "object" && value !== null && "error" in value;
const skipped = (value: unknown): value is { skipped: string } =>
  typeof value === "object" && value !== null && "skipped" in value;

/** The systems of the main table, as the README names them. */
const SYSTEM_NAMES: Record<string, string> = {
  delayq: "**delayq** (library)",
  "delayq-http-node": "**delayq** (HTTP, `functions/node.ts`)",
  "delayq-http-wrangler": "**delayq** (HTTP, `wrangler dev`)",
  bullmq: "BullMQ 6.7",
  "bee-queue": "bee-queue 2.0",
  rsmq: "rsmq 0.12",
};

/** The main table: every system on workloads A, B and C. */
export function systemsTable(json: Json): string {
  const rows: string[][] = [];
  for (const [key, name] of Object.entries(SYSTEM_NAMES)) {
    const entry = json[key] as Json | undefined;
    if (!entry) continue;
    const late = entry.lateness as Json | null;
    const lateness = late
      ? [late.min, late.p50, late.p99, late.max].map((value) => ms(value)).join(" / ")
      : "error";
    const cmds = fmt(entry.cmdsPerJob, 2);
    rows.push([
      name,
      key.startsWith("delayq") ? `**${cmds}**` : cmds,
      fmt(entry.requestsPerJob, 2),
      fmt(entry.jobsPerSec),
      lateness,
      fmt(entry.idleCmdsPerMinute),
    ]);
  }
  return table(
    [
      "system",
      "Redis commands / job",
      "requests / job",
      "jobs/s (consume)",
      "lateness ms min / p50 / p99 / max",
      "idle commands / min",
    ],
    ["l", "r", "r", "r", "r", "r"],
    rows,
  );
}

const pair = (p: Json | undefined) => (p ? `${ms(p.p50)} / ${ms(p.p99)}` : "–");

/**
 * "1", "10", "10, finishMany" (each pop's jobs finished in one request) or "1, finishAndPop"
 * (finished by the next pop).
 */
function popLabel(run: SingleRun): string {
  if (run.finishMany) return `${run.popCount}, finishMany`;
  return run.finishNext ? `${run.popCount}, finishAndPop` : String(run.popCount);
}

function singleRow(run: SingleRun): string[] {
  const latency = run.latencyMs as unknown as Record<string, Json>;
  return [
    run.system === "ouqiang/delay-queue" ? "ouqiang/delay-queue (Go, TCP)" : run.system,
    popLabel(run),
    fmt(run.cmdsPerJob, 2),
    fmt(run.restRequestsPerJob, 2),
    fmt(run.addPerSec),
    fmt(run.consumePerSec),
    fmt(run.lifecyclesPerSec),
    fmt(run.serviceCpuMsPerRequest, 2),
    fmt(run.redisCpuMsPerJob, 3),
    fmt(run.clientCpuMsPerJob, 3),
    pair(latency.add),
    pair(latency.pop),
    pair(latency.finish),
  ];
}

/**
 * What serving one job cost the systems under test, the benchmark's own process left out: the
 * service's CPU per job plus redis-server's (over REST the bridge, Upstash's stand-in, is not in
 * it). Jobs/s also count the benchmark's client, which shares the cores.
 */
function serverCpuPerJob(run: SingleRun): number {
  return (run.serviceCpuMsPerJob ?? 0) + run.redisCpuMsPerJob;
}

/** The single-job shape: every delayq run and ouqiang's, then jobs/s as ratios to ouqiang. */
export function singleTables(value: unknown): string {
  if (!value) return "_not run_";
  if (hasError(value)) return `_failed: ${value.error}_`;
  const single = value as SingleResult;
  const rows = single.runs.map(singleRow);
  const ouqiang = single.ouqiang;
  if (!skipped(ouqiang) && !hasError(ouqiang)) rows.push(singleRow(ouqiang));
  const out = [
    table(
      [
        "system",
        "pop",
        "Redis cmds / job",
        "REST requests / job",
        "add/s",
        "pop+finish/s",
        "lifecycles/s",
        "server CPU ms / request",
        "redis-server CPU ms / job",
        "client CPU ms / job",
        "add ms p50 / p99",
        "pop ms p50 / p99",
        "finish ms p50 / p99",
      ],
      ["l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r"],
      rows,
    ),
  ];
  if (skipped(ouqiang)) out.push("", `_${ouqiang.skipped}._`);
  else if (hasError(ouqiang)) out.push("", `_ouqiang/delay-queue failed: ${ouqiang.error}_`);
  else {
    const ratios = single.runs
      .filter((run) => run.via === "http")
      .map((run) => [
        `${run.system}, pop ${popLabel(run)}`,
        `${fmt(run.lifecyclesPerSec / ouqiang.lifecyclesPerSec, 2)}×`,
        `${fmt(run.consumePerSec / ouqiang.consumePerSec, 2)}×`,
        `${fmt(run.addPerSec / ouqiang.addPerSec, 2)}×`,
        `${fmt(run.cmdsPerJob / ouqiang.cmdsPerJob, 2)}×`,
        `${fmt((run.serviceCpuMsPerRequest ?? 0) / (ouqiang.serviceCpuMsPerRequest ?? 1), 1)}×`,
        `${fmt(serverCpuPerJob(run) / serverCpuPerJob(ouqiang), 2)}×`,
      ]);
    out.push(
      "",
      table(
        [
          "delayq over HTTP on Node ÷ ouqiang/delay-queue",
          "lifecycles/s",
          "pop+finish/s",
          "add/s",
          "Redis cmds / job",
          "server CPU / request",
          "service + redis-server CPU / job",
        ],
        ["l", "r", "r", "r", "r", "r", "r"],
        ratios,
      ),
    );
  }
  if (single.pairs && single.pairs.length > 0) {
    const pairs = single.pairs;
    const line = (what: string, rate: (pair: PairRun) => number | undefined) => {
      if (pairs.some((pair) => rate(pair) === undefined)) return;
      const ratios = pairs.map((pair) => (rate(pair) ?? 0) / pair.ouqiang);
      const each = pairs
        .map(
          (pair, i) =>
            `${fmt(ratios[i], 2)}× (${fmt(rate(pair))} ÷ ${fmt(pair.ouqiang)}, ${pair.first} first)`,
        )
        .join(", ");
      out.push(
        "",
        `Alternating pairs, delayq HTTP TCP ${what} ÷ ouqiang/delay-queue, lifecycles/s: median ` +
          `**${fmt(median(ratios), 2)}×** of ${each}.`,
      );
    };
    line("pop 1", (pair) => pair.delayq);
    line("pop 1 with finishAndPop", (pair) => pair.delayqNext);
    line("pop 10 with finishMany", (pair) => pair.delayqTen);
    const phased = pairs.flatMap((pair) => (pair.phases ? [pair.phases] : []));
    if (phased.length === pairs.length) {
      const ratio = (phase: "add" | "consume") =>
        phased
          .map((p) => fmt(p.delayq[phase] / p.ouqiang[phase], 2))
          .join(", ")
          .concat("×");
      out.push(
        "",
        `Pop 1's two phases in the same pairs, delayq ÷ ouqiang/delay-queue, jobs/s: adding ` +
          `${ratio("add")}; popping and finishing ${ratio("consume")}.`,
      );
    }
  }
  for (const [name, error] of Object.entries(single.errors)) {
    out.push("", `_${name} failed: ${error}_`);
  }
  return out.join("\n");
}

/** The herd: commands and lateness per variant. */
export function herdTable(value: unknown): string {
  if (!value) return "_not run_";
  if (hasError(value)) return `_failed: ${value.error}_`;
  const single = value as SingleResult;
  return table(
    [
      "system",
      "jobs",
      "Redis cmds / job",
      "REST requests / job",
      "lateness ms p50 / p99 / max",
      "early",
      "missing",
    ],
    ["l", "r", "r", "r", "r", "r", "r"],
    single.herd.map((run) => [
      run.system,
      fmt(run.jobs),
      fmt(run.cmdsPerJob, 2),
      fmt(run.restRequestsPerJob, 2),
      [run.lateness.p50, run.lateness.p99, run.lateness.max].map(ms).join(" / "),
      fmt(run.early),
      fmt(run.missing),
    ]),
  );
}

/** One idle long-polling consumer, and one empty pop. */
export function idleTable(value: unknown): string {
  if (!value) return "_not run_";
  if (hasError(value)) return `_failed: ${value.error}_`;
  const idle = value as IdleResult;
  const rows = idle.runs.map((run) => [
    `${run.system}, pop 1 wait 20 s`,
    fmt(run.cmdsPerMinute),
    fmt(run.restRequestsPerMinute),
    fmt(run.emptyPopCmds, 1),
    fmt(run.emptyPopRestRequests, 1),
  ]);
  if (!skipped(idle.ouqiang)) {
    rows.push([
      "ouqiang/delay-queue, /pop (BLPOP 178 s)",
      fmt(idle.ouqiang.cmdsPerMinute),
      "–",
      "–",
      "–",
    ]);
  }
  const out = [
    table(
      [
        "idle consumer",
        "Redis cmds / min",
        "REST requests / min",
        "empty pop: Redis cmds",
        "empty pop: REST requests",
      ],
      ["l", "r", "r", "r", "r"],
      rows,
    ),
  ];
  for (const [name, error] of Object.entries(idle.errors)) out.push("", `_${name}: ${error}_`);
  return out.join("\n");
}

const latenessCells = (group: LatenessGroup | undefined) =>
  group
    ? [
        fmt(group.jobs),
        [group.p50, group.p99, group.max].map(ms).join(" / "),
        fmt(group.early),
        fmt(group.missing),
        fmt(group.duplicates),
      ]
    : ["–", "–", "–", "–", "–"];

/** P1 lateness by mode and delay, P2 costs, P3 scale. */
export function pushTables(value: unknown): string {
  if (!value) return "_not run_";
  if (hasError(value)) return `_failed: ${value.error}_`;
  const push = value as PushResult;
  const out: string[] = [];
  const rows: string[][] = [];
  for (const run of push.lateness) {
    for (const [group, lateness] of Object.entries(run.byDelay)) {
      const target =
        run.mode === "qstash" || !group.startsWith("25")
          ? `p99 ≤ 1 s: ${lateness.count > 0 && lateness.p99 <= 1000 ? "✓" : "✗"}`
          : "reported apart";
      rows.push([run.mode, group, ...latenessCells(lateness), target]);
    }
  }
  out.push(
    table(
      [
        "push",
        "jobs added with",
        "jobs",
        "lateness ms p50 / p99 / max",
        "early",
        "missing",
        "duplicates",
        "target",
      ],
      ["l", "l", "r", "r", "r", "r", "r", "l"],
      rows,
    ),
  );
  if (push.minute.length > 0) {
    out.push(
      "",
      table(
        [
          "push, 1,000 due in a minute",
          "Redis cmds / job",
          "Redis requests / job",
          "QStash requests / job",
          "subrequests / job (requests + ticks + callbacks)",
          "lateness ms p50 / p99 / max",
          "early",
          "most jobs one tick took",
        ],
        ["l", "r", "r", "r", "r", "r", "r", "r"],
        push.minute.map((run) => [
          run.mode,
          fmt(run.cost.cmdsPerJob, 2),
          fmt(run.cost.redisRequestsPerJob, 2),
          fmt(run.cost.qstashRequestsPerJob, 3),
          `${fmt(run.cost.subrequestsPerJob, 2)} (${fmt(run.cost.subrequestsPerJobBy.requests, 2)} + ${fmt(run.cost.subrequestsPerJobBy.ticks, 2)} + ${fmt(run.cost.subrequestsPerJobBy.callbacks, 2)})`,
          [run.lateness.p50, run.lateness.p99, run.lateness.max].map(ms).join(" / "),
          fmt(run.lateness.early),
          fmt(run.ticks.maxJobsPerTick),
        ]),
      ),
    );
  }
  const scale = push.scale;
  if (scale) {
    const t = scale.ticks;
    out.push(
      "",
      table(
        ["push at scale (direct)", "value"],
        ["l", "r"],
        [
          ["jobs, due within", `${fmt(scale.jobs)}, ${fmt(scale.spanMs / 1000)} s`],
          [
            "delivered at least once / missing / early / duplicates",
            `${fmt(scale.lateness.count)} / ${fmt(scale.lateness.missing)} / ${fmt(scale.lateness.early)} / ${fmt(scale.lateness.duplicates)}`,
          ],
          [
            "lateness ms p50 / p99 / max",
            [scale.lateness.p50, scale.lateness.p99, scale.lateness.max].map(ms).join(" / "),
          ],
          [
            `ticks (every ${fmt(scale.tickMs / 1000)} s) / ticks that carried work`,
            `${t.ticks} / ${t.carried}`,
          ],
          ["most jobs one tick took", fmt(t.maxJobsPerTick)],
          [
            `longest tick / its invocation, ms (budget ${fmt(t.tickBudgetMs)})`,
            `${ms(t.maxTickMs)} / ${ms(t.maxInvocationMs)}`,
          ],
          [
            `most subrequests in one tick's invocation (budget ${fmt(t.subrequestBudget)})`,
            fmt(t.maxSubrequests),
          ],
          [
            "at a cron once a minute: ticks needed / last jobs late by",
            scale.atOnceAMinute
              ? `${fmt(scale.atOnceAMinute.ticksNeeded)} / ~${fmt(scale.atOnceAMinute.lastLateMinutes)} min`
              : "– (the requests delivered them)",
          ],
          [
            "Redis cmds / requests / subrequests per job",
            `${fmt(scale.cost.cmdsPerJob, 2)} / ${fmt(scale.cost.redisRequestsPerJob, 2)} / ${fmt(scale.cost.subrequestsPerJob, 2)}`,
          ],
        ],
      ),
    );
  }
  for (const [name, error] of Object.entries(push.errors))
    out.push("", `_${name} failed: ${error}_`);
  return out.join("\n");
}

const burstColumn = (run: BurstRun) =>
  `${run.handOffs ? "hand-offs" : "no QStash"}, DQ_SUBREQUESTS=${fmt(run.subrequests)}`;

/** The burst past one invocation's budget (with hand-offs and without), and failure notices. */
export function burstTables(value: unknown): string {
  if (!value) return "_not run_";
  if (hasError(value)) return `_failed: ${value.error}_`;
  const burst = value as BurstResult;
  const runs = [...burst.handOffs, ...(burst.without ? [burst.without] : [])];
  const out: string[] = [];
  if (runs.length > 0) {
    const row = (name: string, cell: (run: BurstRun) => string) => [name, ...runs.map(cell)];
    const withinS = fmt((runs[0]?.withinMs ?? 0) / 1000);
    out.push(
      table(
        [`${fmt(burst.options.jobs)} direct jobs due at once, one tick`, ...runs.map(burstColumn)],
        ["l", ...runs.map(() => "r" as const)],
        [
          row(
            `delivered within ${withinS} s of due / missing`,
            (r) => `${fmt(r.deliveredWithin)} / ${fmt(r.missing)}`,
          ),
          row("lateness ms p50 / p99 / max", (r) =>
            [r.lateness.p50, r.lateness.p99, r.lateness.max].map(ms).join(" / "),
          ),
          row("early / delivered twice", (r) => `${fmt(r.early)} / ${fmt(r.deliveredTwice)}`),
          row(
            "invocations: tick + hand-off runs",
            (r) => `${r.invocations.ticks} + ${r.invocations.handOffRuns}`,
          ),
          row("hand-off runs started, s after due: earliest / latest", (r) =>
            r.handOffStartedMs.length === 0
              ? "–"
              : `${fmt(Math.min(...r.handOffStartedMs) / 1000, 1)} / ${fmt(Math.max(...r.handOffStartedMs) / 1000, 1)}`,
          ),
          row(
            "most subrequests in one invocation: tick / hand-off run",
            (r) => `${fmt(r.maxSubrequests.tick)} / ${fmt(r.maxSubrequests.handOff)}`,
          ),
          row(
            "QStash messages / job ($ per 1M jobs)",
            (r) => `${fmt(r.qstashMessagesPerJob, 4)} ($${fmt(r.dollarsPerMillionJobs, 2)})`,
          ),
          row(
            "Redis commands / subrequests per job",
            (r) => `${fmt(r.cmdsPerJob, 2)} / ${fmt(r.subrequestsPerJob, 2)}`,
          ),
          row(
            "this process's timer lag ms p99 / max",
            (r) => `${ms(r.timerLagMs.p99)} / ${ms(r.timerLagMs.max)}`,
          ),
        ],
      ),
    );
  }
  const notices = burst.notices;
  if (notices) {
    out.push(
      "",
      table(
        [
          `failure notices (cron every ${fmt(notices.cronMs / 1000)} s)`,
          "jobs / dead / told",
          "death → notice ms p50 / p99 / max",
          "told twice",
          "told after a tick",
        ],
        ["l", "r", "r", "r", "r"],
        notices.groups.map((group) => [
          `died in a ${group.diedIn}'s run`,
          `${fmt(group.jobs)} / ${fmt(group.dead)} / ${fmt(group.notices)}`,
          [group.deathToNotice.p50, group.deathToNotice.p99, group.deathToNotice.max]
            .map(ms)
            .join(" / "),
          fmt(group.noticedTwice),
          fmt(group.afterATick),
        ]),
      ),
    );
  }
  for (const [name, error] of Object.entries(burst.errors))
    out.push("", `_${name} failed: ${error}_`);
  return out.join("\n");
}

/** W: lateness, cost per poll, per start, per 1,000 watches per hour, invocations. */
export function paymentsTable(value: unknown): string {
  if (!value) return "_not run_";
  if (hasError(value)) return `_failed: ${value.error}_`;
  const w = value as PaymentsResult;
  const l = w.lateness;
  const h = w.perThousandWatchesPerHour;
  const rows: string[][] = [
    [
      "watches / polls / ended (expired at their deadline)",
      `${fmt(w.watches)} / ${fmt(w.polls)} / ${fmt(w.outcomes.expired ?? 0)}`,
    ],
    [
      "polls per watch: how many watches had each count",
      Object.entries(w.pollsPerWatch ?? {})
        .map(([polls, watches]) => `${polls}: ${fmt(watches)}`)
        .join(", "),
    ],
    [
      "schedule run (s) ← WeChat Pay's (s)",
      `${w.schedule.map((s) => fmt(s, s < 10 ? 2 : 0)).join(", ")} ← ${w.realSchedule.join(", ")}`,
    ],
    [
      "poll lateness ms p50 / p99 / max; early",
      `${[l.p50, l.p99, l.max].map(ms).join(" / ")}; ${fmt(l.early)}`,
    ],
    ...(w.latenessBy
      ? [
          [
            "poll lateness p99 ms (polls over 1 s) by the invocation that made it",
            Object.entries(w.latenessBy)
              .map(
                ([kind, by]) => `${kind} ${ms(by.p99)} (${fmt(by.overSecond)} of ${fmt(by.count)})`,
              )
              .join(", "),
          ],
        ]
      : []),
    [
      "per poll: Redis cmds / Redis requests / provider requests / subrequests",
      `${fmt(w.perPoll.cmds, 1)} / ${fmt(w.perPoll.redisRequests, 2)} / ${fmt(w.perPoll.providerRequests, 2)} / ${fmt(w.perPoll.subrequests, 2)}`,
    ],
    [
      "per start: Redis cmds / Redis requests / subrequests",
      `${fmt(w.start.cmds, 1)} / ${fmt(w.start.redisRequests, 2)} / ${fmt(w.start.subrequests, 2)}`,
    ],
    [
      `per 1,000 watches per hour (start + ${h.polls} polls): Redis cmds / requests / provider requests`,
      `${fmt(h.cmds)} / ${fmt(h.redisRequests)} / ${fmt(h.providerRequests)}`,
    ],
    [
      "CPU per poll in delayq's process on Node, ms (signing, verifying, scripts' clients)",
      fmt(w.perPoll.harnessCpuMs, 2),
    ],
    ...(w.pollCpu
      ? [
          [
            "CPU per poll in the service's process, ms: workerd (wrangler dev) / functions/node.ts (a tick's polls, idle taken off)",
            [w.pollCpu.workerd, w.pollCpu.node]
              .map((part) =>
                hasError(part)
                  ? `failed (${part.error.slice(0, 80)})`
                  : `${fmt(part.cpuMsPerPoll, 2)} (${fmt(part.polls)} polls)`,
              )
              .join(" / "),
          ],
        ]
      : []),
    [
      `ticks (every ${fmt(w.tickMs / 1000, 0)} s): count / longest ms (budget ${fmt(w.ticks.tickBudgetMs)}) / carried`,
      `${fmt(w.ticks.count)} / ${ms(w.ticks.maxTickMs)} / ${fmt(w.ticks.carried)}`,
    ],
    [
      `invocations (ticks, starts, hand-off runs): most subrequests in one (which) / over the budget (DQ_SUBREQUESTS ${fmt(w.invocations.budget ?? 10_000)}) / over 50`,
      `${fmt(w.invocations.maxSubrequests)} (${w.invocations.maxSubrequestsLabel}) / ${fmt(w.invocations.overBudget)} / ${fmt(w.invocations.overFreePlan)}`,
    ],
    ...(w.handOffs
      ? [
          [
            "hand-offs through QStash: asks / runs for polls due before the next tick / fresh runs / polls they made / most subrequests in one / QStash messages per poll",
            w.handOffs.enabled
              ? `${fmt(w.handOffs.asks)} / ${fmt(w.handOffs.covers ?? 0)} / ${fmt(w.handOffs.runs)} / ${fmt(w.handOffs.polls)} / ${fmt(w.handOffs.maxSubrequests)} / ${fmt(w.handOffs.qstashMessagesPerPoll, 4)}`
              : "off (no QStash)",
          ],
        ]
      : []),
    ["longest invocation (start to last subrequest), s", fmt(w.invocations.maxSpanMs / 1000, 1)],
  ];
  const out = [table(["payment watches (WeChat Pay sandbox)", "value"], ["l", "r"], rows)];
  for (const [error, n] of Object.entries(w.errors)) out.push("", `_${n}× ${error}_`);
  return out.join("\n");
}

export function cryptoTable(value: unknown): string {
  if (!value) return "_not run_";
  if (hasError(value)) return `_failed: ${value.error}_`;
  const crypto = value as CryptoResult;
  return [
    table(
      ["provider", "CPU µs per signed request", "CPU µs per verified answer", "whole query µs"],
      ["l", "r", "r", "r"],
      crypto.rows.map((row) => [
        row.provider,
        fmt(row.signedRequestUs),
        fmt(row.verifiedAnswerUs),
        fmt(row.wholeQueryUs),
      ]),
    ),
    "",
    `Primitives: one RSA-2048 signature ${fmt(crypto.signUs)} µs, one verification ` +
      `${fmt(crypto.verifyUs)} µs (${fmt(crypto.iterations)} calls each, medians of 5 rounds).`,
  ].join("\n");
}

/** The machine and the run, one paragraph. */
/**
 * The machine and the run. `dated`: with the run's date and commit, as the console and
 * bench/TARGETS.md want; docs/benchmarks.md describes the product as it is, so it gets neither.
 */
export function machineLine(json: Json, dated = true): string {
  const m = (json.machine ?? {}) as Json;
  const load = (m.loadAverage ?? {}) as { atStart?: number[]; atEnd?: number[] };
  const loads = (list?: number[]) => (list ? list.map((n) => n.toFixed(1)).join(", ") : "?");
  const date = typeof m.date === "string" ? m.date.slice(0, 10) : "?";
  const minutes = fmt(
    num(m.runSeconds) === undefined ? undefined : (m.runSeconds as number) / 60,
    0,
  );
  const mode = String((m.settings as Json | undefined)?.mode ?? "?");
  const when = dated
    ? `run of ${date} (${mode} mode, ${minutes} min) on commit ${String(m.commit ?? "?")}` +
      `${m.uncommittedChanges ? " (with uncommitted changes)" : ""}; `
    : `one run (${mode} mode, ${minutes} min); `;
  return (
    `Machine: ${String(m.cores ?? "?")} cores (${String(m.cpu ?? "?")}), ${String(m.memoryGiB ?? "?")} GiB, ` +
    `${String(m.os ?? "?")}, Node ${String(m.node ?? "?")}, redis-server ${String(m.redis ?? "?")}; ` +
    when +
    `load average (1, 5, 15 min) ${loads(load.atStart)} at the start, ${loads(load.atEnd)} at the end ` +
    "(the machine is shared: other work ran beside the benchmark)." +
    rerunLine(m.singleRerun as Json | undefined, loads, dated)
  );
}

/**
 * A part rerun alone and merged into the results (`machine.singleRerun`): the single-job shape
 * and the herd (`--only single`), with its own commit, date and load.
 */
function rerunLine(
  rerun: Json | undefined,
  loads: (list?: number[]) => string,
  dated: boolean,
): string {
  if (!rerun) return "";
  const load = (rerun.loadAverage ?? {}) as { atStart?: number[]; atEnd?: number[] };
  const date = typeof rerun.date === "string" ? rerun.date.slice(0, 10) : "?";
  const when = dated
    ? `of ${date} on commit ${String(rerun.commit ?? "?")}` +
      `${rerun.uncommittedChanges ? " (with uncommitted changes)" : ""}, `
    : "at another time, ";
  return (
    ` The single-job and herd tables come from a rerun of that part alone (\`--only single\`) ` +
    `${when}load average ` +
    `${loads(load.atStart)} at the start, ${loads(load.atEnd)} at the end: compare within them.`
  );
}

/** Everything beyond the main table, for the console after a run. */
export function newTables(json: Json): string {
  return [
    "Single-job shape:",
    singleTables(json.single),
    "",
    "Herd:",
    herdTable(json.single),
    "",
    "Idle:",
    idleTable(json.idle),
    "",
    "Push (P):",
    pushTables(json.push),
    "",
    "Burst past one invocation's subrequests, failure notices:",
    burstTables(json.burst),
    "",
    "Payment watches (W):",
    paymentsTable(json.payments),
    "",
    "Payment providers' signing cost:",
    cryptoTable(json.paymentsCrypto),
    "",
    machineLine(json),
  ].join("\n");
}
