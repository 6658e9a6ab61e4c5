// The Prometheus text renderer and the in-process counters, read back by an independent parser.
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { describe, expect, it } from "vitest";
import { countedStep, createCounters } from "../../src/metrics/counters";
import { renderPrometheus } from "../../src/metrics/prometheus";
import { createScheduler } from "../../src/scheduler";
import { testRun } from "../support/app";
import { parseMetrics } from "./prometheus-lint";

describe("renderPrometheus", () => {
  it("writes HELP, TYPE and samples that a Prometheus parser reads back", () => {
    const text = renderPrometheus([
      {
        name: "delayq_jobs",
        help: "Jobs per topic",
        type: "gauge",
        samples: [
          { labels: { topic: "a", state: "ready" }, value: 3 },
          { labels: { topic: "b", state: "dead" }, value: 0 },
        ],
      },
      { name: "delayq_up", help: "Up", type: "gauge", samples: [{ value: 1.5 }] },
    ]);
    expect(text).toBe(
      "# HELP delayq_jobs Jobs per topic\n# TYPE delayq_jobs gauge\n" +
        'delayq_jobs{topic="a",state="ready"} 3\ndelayq_jobs{topic="b",state="dead"} 0\n' +
        "# HELP delayq_up Up\n# TYPE delayq_up gauge\ndelayq_up 1.5\n",
    );
    const metrics = parseMetrics(text);
    expect(metrics.value("delayq_jobs", { topic: "a", state: "ready" })).toBe(3);
    expect(metrics.family("delayq_jobs")?.type).toBe("GAUGE");
    expect(metrics.value("delayq_up")).toBe(1.5);
  });

  it("escapes label values and help text so that any string survives the round trip", () => {
    const nasty = 'quote " backslash \\ newline \n brace } comma , 雪 \\n';
    const text = renderPrometheus([
      {
        name: "x_total",
        help: "help with \\ and \n a second line",
        type: "counter",
        samples: [{ labels: { outcome: nasty, other: "" }, value: 7 }],
      },
    ]);
    expect(text.split("\n")).toHaveLength(4); // HELP, TYPE, one sample, "" after the last \n
    const [family] = parsePrometheusTextFormat(text);
    expect(family?.help).toBe("help with \\ and \n a second line");
    expect(family?.metrics[0]?.labels).toEqual({ outcome: nasty, other: "" });
    expect(parseMetrics(text).value("x_total", { outcome: nasty, other: "" })).toBe(7);
  });

  it("writes special values as Prometheus spells them", () => {
    const text = renderPrometheus([
      {
        name: "v",
        help: "v",
        type: "gauge",
        samples: [
          { labels: { k: "nan" }, value: Number.NaN },
          { labels: { k: "inf" }, value: Number.POSITIVE_INFINITY },
          { labels: { k: "-inf" }, value: Number.NEGATIVE_INFINITY },
          { labels: { k: "big" }, value: 1e21 },
        ],
      },
    ]);
    expect(text).toContain('v{k="nan"} NaN\n');
    expect(text).toContain('v{k="inf"} +Inf\n');
    expect(text).toContain('v{k="-inf"} -Inf\n');
    expect(parseMetrics(text).value("v", { k: "big" })).toBe(1e21);
  });

  it("refuses names Prometheus would not accept (a bug of ours, not bad input)", () => {
    const family = (name: string, labels: Record<string, string> = {}) => ({
      name,
      help: "h",
      type: "gauge" as const,
      samples: [{ labels, value: 1 }],
    });
    expect(() => renderPrometheus([family("delayq-jobs")])).toThrow(/invalid metric name/);
    expect(() => renderPrometheus([family("ok", { "bad-label": "x" })])).toThrow(/label name/);
    expect(() => renderPrometheus([family("ok", { __reserved: "x" })])).toThrow(/label name/);
    expect(() => renderPrometheus([family("ok"), family("ok")])).toThrow(/twice/);
  });

  it("the lint catches what promtool would (so a passing scrape means something)", () => {
    expect(() => parseMetrics("# HELP a x\n# TYPE a counter\na 1\n")).toThrow(/_total/);
    expect(() => parseMetrics("# HELP a x\n# TYPE a gauge\na 1\n# HELP b y\nb 2\na 3\n")).toThrow(
      /split/,
    );
    expect(() => parseMetrics('# HELP a x\na{k="1"} 1\na{k="1"} 2\n')).toThrow(/repeated/);
    expect(() => parseMetrics("a 1\n")).toThrow(/without HELP/);
    expect(() => parseMetrics("# HELP a x\na one\n")).toThrow(/not a HELP/);
  });
});

describe("counters", () => {
  it("adds per label set, keeps only the declared labels, and ignores bad increments", () => {
    const counters = createCounters(() => 1_800_000_000_000);
    counters.inc("delayq_deliveries_total", { topic: "t", outcome: "done" });
    counters.inc("delayq_deliveries_total", { topic: "t", outcome: "done" }, 2);
    counters.inc("delayq_deliveries_total", { topic: "t", outcome: "failed" });
    counters.inc("delayq_polls_total", { provider: "alipay", outcome: "paid" }, -1);
    counters.inc("delayq_polls_total", { provider: "alipay", outcome: "paid" }, Number.NaN);
    counters.inc("delayq_polls_total", {
      provider: "wechatpay",
      outcome: "pending",
      extra: "dropped",
    } as never);
    const metrics = parseMetrics(renderPrometheus(counters.snapshot()));
    expect(metrics.value("delayq_deliveries_total", { topic: "t", outcome: "done" })).toBe(3);
    expect(metrics.value("delayq_deliveries_total", { topic: "t", outcome: "failed" })).toBe(1);
    expect(metrics.value("delayq_polls_total", { provider: "alipay", outcome: "paid" })).toBe(
      undefined,
    );
    expect(metrics.value("delayq_polls_total", { provider: "wechatpay", outcome: "pending" })).toBe(
      1,
    );
    // Families nobody counted in still announce themselves.
    expect(metrics.family("delayq_tick_slices_total")?.type).toBe("COUNTER");
    expect(counters.startedAt).toBe(1_800_000_000_000);
  });

  it("countedStep counts a step's slices and work, and its failures", async () => {
    const counters = createCounters();
    let fail = false;
    const step = countedStep(
      {
        name: "drain",
        async run() {
          if (fail) throw new Error("Redis down");
          return { promoted: 5, expired: 2, died: 1, slices: 3, more: false };
        },
      },
      counters,
    );
    const scheduler = createScheduler({ steps: [step] });
    await scheduler.tick(testRun({ startedAt: 1 }));
    await scheduler.tick(testRun({ startedAt: 2 }));
    fail = true;
    const report = await scheduler.tick(testRun({ startedAt: 3 }));
    expect(report.steps.drain).toEqual({ error: "Redis down", more: true });
    const metrics = parseMetrics(renderPrometheus(counters.snapshot()));
    expect(metrics.value("delayq_tick_slices_total", { step: "drain" })).toBe(6);
    expect(metrics.value("delayq_tick_work_total", { step: "drain", kind: "promoted" })).toBe(10);
    expect(metrics.value("delayq_tick_work_total", { step: "drain", kind: "died" })).toBe(2);
    expect(metrics.value("delayq_tick_step_failures_total", { step: "drain" })).toBe(1);
  });
});
