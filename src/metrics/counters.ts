// In-process counters (deliveries, polls, tick slices) for /metrics, and a scheduler-step wrapper
// that feeds them. They live as long as the process (or Worker isolate) that counts them.
import type { SchedulerStep, StepReport } from "../scheduler/scheduler";
import type { Labels, MetricFamily } from "./prometheus";

/** Every counter delayq keeps, with its help text and label names. */
export const COUNTERS = {
  delayq_deliveries_total: {
    help:
      "Push deliveries by topic and outcome since the process started: done, retry, bury " +
      '(the receiver\'s answer) or failed (error status, timeout, network error). outcome="failed" ' +
      "counts the failures.",
    labels: ["topic", "outcome"],
  },
  delayq_polls_total: {
    help:
      "Payment-status queries by provider and outcome since the process started (e.g. pending, " +
      "paid, closed, failed, error).",
    labels: ["provider", "outcome"],
  },
  delayq_refund_polls_total: {
    help:
      "Refund-status queries by provider and outcome since the process started (e.g. pending, " +
      "succeeded, closed, abnormal, expired, transient).",
    labels: ["provider", "outcome"],
  },
  delayq_schedule_fires_total: {
    help:
      "Jobs recurring schedules made (one a fire) by schedule since the process started; at " +
      'most DQ_METRICS_MAX_TOPICS schedules are named, the others counted as schedule="~other".',
    labels: ["schedule"],
  },
  delayq_tick_slices_total: {
    help: "Scheduler slices run (one Redis script call each) by step since the process started.",
    labels: ["step"],
  },
  delayq_tick_work_total: {
    help:
      "What scheduler steps did since the process started, by step and kind (drain: promoted, " +
      "expired, died).",
    labels: ["step", "kind"],
  },
  delayq_tick_step_failures_total: {
    help: "Scheduler steps that failed (threw) since the process started, by step.",
    labels: ["step"],
  },
} as const satisfies Record<string, { help: string; labels: readonly string[] }>;

export type CounterName = keyof typeof COUNTERS;

/** The labels a counter takes, each a string. */
export type CounterLabels<N extends CounterName> = Record<
  (typeof COUNTERS)[N]["labels"][number],
  string
>;

export type Counters = {
  /** Adds `n` (default 1) to the counter with these labels. Never throws. */
  inc<N extends CounterName>(name: N, labels: CounterLabels<N>, n?: number): void;
  /** Every counter, as families for renderPrometheus; a counter nobody touched has no samples. */
  snapshot(): MetricFamily[];
  /** When counting started, unix ms (counters reset then). */
  readonly startedAt: number;
};

/**
 * A registry of counters for one process. Pass the same object to the app (`createApp`'s
 * `counters`) and to whatever counts (scheduler steps, push delivery, payment polling).
 */
export function createCounters(clock: () => number = Date.now): Counters {
  const values = new Map<CounterName, Map<string, { labels: Labels; value: number }>>();
  return {
    startedAt: clock(),
    inc(name, labels, n = 1) {
      // A counter only goes up; a bad increment is dropped rather than breaking the caller.
      if (!(name in COUNTERS) || !Number.isFinite(n) || n < 0) return;
      const clean: Record<string, string> = {};
      for (const label of COUNTERS[name].labels) {
        clean[label] = String((labels as Record<string, unknown>)[label] ?? "");
      }
      const key = JSON.stringify(clean);
      let series = values.get(name);
      if (!series) {
        series = new Map();
        values.set(name, series);
      }
      const entry = series.get(key);
      if (entry) entry.value += n;
      else series.set(key, { labels: clean, value: n });
    },
    snapshot() {
      return (Object.keys(COUNTERS) as CounterName[]).map((name) => ({
        name,
        help: COUNTERS[name].help,
        type: "counter" as const,
        samples: [...(values.get(name)?.values() ?? [])]
          .map(({ labels, value }) => ({ labels, value }))
          .sort((a, b) => compareLabels(a.labels, b.labels)),
      }));
    },
  };
}

function compareLabels(a: Labels, b: Labels): number {
  const x = JSON.stringify(a);
  const y = JSON.stringify(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * A scheduler step that counts what the step reports: `slices` into delayq_tick_slices_total,
 * every other number (promoted, expired, died, ...) into delayq_tick_work_total, and a throw into
 * delayq_tick_step_failures_total (then rethrown, so the scheduler still reports it).
 */
export function countedStep<R extends StepReport>(
  step: SchedulerStep<R>,
  counters: Counters,
): SchedulerStep<R> {
  return {
    name: step.name,
    async run(context) {
      let report: R;
      try {
        report = await step.run(context);
      } catch (error) {
        counters.inc("delayq_tick_step_failures_total", { step: step.name });
        throw error;
      }
      for (const [kind, value] of Object.entries(report)) {
        if (typeof value !== "number") continue;
        if (kind === "slices") counters.inc("delayq_tick_slices_total", { step: step.name }, value);
        else counters.inc("delayq_tick_work_total", { step: step.name, kind }, value);
      }
      return report;
    },
  };
}
