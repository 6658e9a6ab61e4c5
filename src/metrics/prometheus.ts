// The Prometheus text exposition format (0.0.4): families with HELP and TYPE, escaped label values.

/** The Content-Type Prometheus expects for the text format. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

export type MetricType = "counter" | "gauge" | "untyped";

export type Labels = Readonly<Record<string, string>>;

export type Sample = { labels?: Labels; value: number };

/** One metric: its name, help text, type and samples (one per label set). */
export type MetricFamily = {
  name: string;
  help: string;
  type: MetricType;
  samples: readonly Sample[];
};

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/**
 * Renders families as the text format. Names are checked (a bad one is a bug of ours, so it
 * throws); label values may be anything and are escaped. A family with no samples still gets its
 * HELP and TYPE lines, so a scrape always shows what could be there.
 */
export function renderPrometheus(families: readonly MetricFamily[]): string {
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const family of families) {
    if (!METRIC_NAME.test(family.name)) throw new Error(`invalid metric name "${family.name}"`);
    if (seen.has(family.name)) throw new Error(`metric "${family.name}" rendered twice`);
    seen.add(family.name);
    lines.push(`# HELP ${family.name} ${escapeHelp(family.help)}`);
    lines.push(`# TYPE ${family.name} ${family.type}`);
    for (const sample of family.samples) {
      lines.push(`${family.name}${renderLabels(sample.labels)} ${formatValue(sample.value)}`);
    }
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}

function renderLabels(labels: Labels | undefined): string {
  if (!labels) return "";
  const parts: string[] = [];
  for (const [name, value] of Object.entries(labels)) {
    if (!LABEL_NAME.test(name) || name.startsWith("__")) {
      throw new Error(`invalid label name "${name}"`);
    }
    parts.push(`${name}="${escapeLabelValue(value)}"`);
  }
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
}

/** Label values: backslash, double quote and line feed are escaped (the format's three). */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** HELP text: backslash and line feed are escaped. */
function escapeHelp(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(value);
}
