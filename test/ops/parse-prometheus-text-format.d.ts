// Types for parse-prometheus-text-format (the package ships none).
declare module "parse-prometheus-text-format" {
  export type ParsedSample = {
    value: string;
    labels?: Record<string, string>;
    timestamp_ms?: string;
  };
  export type ParsedFamily = {
    name: string;
    help: string;
    type: "COUNTER" | "GAUGE" | "UNTYPED" | "SUMMARY" | "HISTOGRAM";
    metrics: ParsedSample[];
  };
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}
