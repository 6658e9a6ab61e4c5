// Test helper: /metrics text checked the way promtool does (exposition-format rules and the
// Prometheus lint), then parsed by parse-prometheus-text-format, a parser that is not ours.
import parsePrometheusTextFormat, { type ParsedFamily } from "parse-prometheus-text-format";

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
const SAMPLE = new RegExp(
  `^(${NAME})(?:\\{(${LABEL}(?:,${LABEL})*)?\\})? (NaN|[+-]Inf|[-+]?(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][-+]?\\d+)?)$`,
);
const HELP = new RegExp(`^# HELP (${NAME}) (.*)$`);
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|untyped|summary|histogram)$`);

export type Metrics = {
  families: ParsedFamily[];
  /** The value of one sample, by family name and exact labels; undefined when absent. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  family(name: string): ParsedFamily | undefined;
};

/**
 * Checks every rule promtool's `check metrics` checks for the text format, throwing with the line
 * on the first broken one: lines are HELP, TYPE or samples; a family's HELP and TYPE come once,
 * before its samples, and its samples are contiguous; no label set repeats within a family;
 * counters are named *_total; every family has HELP. Then parses with the independent parser.
 */
export function parseMetrics(text: string): Metrics {
  if (!text.endsWith("\n")) throw new Error("the text format ends with a line feed");
  const help = new Map<string, string>();
  const type = new Map<string, string>();
  const closed = new Set<string>();
  const seen = new Map<string, Set<string>>();
  let current: string | undefined;
  const open = (name: string, line: string) => {
    if (current !== name) {
      if (current) closed.add(current);
      if (closed.has(name)) throw new Error(`family ${name} is split: ${line}`);
      current = name;
    }
  };
  for (const line of text.slice(0, -1).split("\n")) {
    let m = HELP.exec(line);
    if (m?.[1]) {
      open(m[1], line);
      if (help.has(m[1])) throw new Error(`second HELP: ${line}`);
      if (seen.has(m[1])) throw new Error(`HELP after samples: ${line}`);
      help.set(m[1], m[2] ?? "");
      continue;
    }
    m = TYPE.exec(line);
    if (m?.[1]) {
      open(m[1], line);
      if (type.has(m[1])) throw new Error(`second TYPE: ${line}`);
      if (seen.has(m[1])) throw new Error(`TYPE after samples: ${line}`);
      type.set(m[1], m[2] ?? "");
      if (m[2] === "counter" && !m[1].endsWith("_total")) {
        throw new Error(`counter not named *_total: ${line}`);
      }
      continue;
    }
    m = SAMPLE.exec(line);
    if (!m?.[1]) throw new Error(`not a HELP, TYPE or sample line: ${JSON.stringify(line)}`);
    open(m[1], line);
    if (!help.has(m[1])) throw new Error(`sample without HELP: ${line}`);
    const labels = m[2] ?? "";
    const names = [...labels.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)].map((x) => x[1]);
    if (new Set(names).size !== names.length) throw new Error(`repeated label name: ${line}`);
    const set = seen.get(m[1]) ?? new Set<string>();
    if (set.has(labels)) throw new Error(`repeated label set: ${line}`);
    set.add(labels);
    seen.set(m[1], set);
  }
  const families = parsePrometheusTextFormat(text);
  const same = (a: Record<string, string> | undefined, b: Record<string, string>) => {
    const x = a ?? {};
    return (
      Object.keys(x).length === Object.keys(b).length &&
      Object.entries(b).every(([k, v]) => x[k] === v)
    );
  };
  return {
    families,
    family: (name) => families.find((f) => f.name === name),
    value(name, labels = {}) {
      const sample = families
        .find((f) => f.name === name)
        ?.metrics.find((s) => same(s.labels, labels));
      return sample === undefined ? undefined : Number(sample.value);
    },
  };
}
