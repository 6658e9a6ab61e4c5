// The one logger: JSON lines. Callers never put tokens, keys or job bodies in an entry.

export type LogEntry = {
  level: "info" | "warn" | "error";
  /** What happened, e.g. "tick", "request_failed". */
  event?: string;
  [field: string]: unknown;
};

export type Logger = (entry: LogEntry) => void;

/** Writes each entry as one JSON line: errors and warnings to stderr, the rest to stdout. */
export const jsonLogger: Logger = (entry) => {
  const line = JSON.stringify(entry);
  if (entry.level === "info") console.log(line);
  else console.error(line);
};

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = () => {};

/** The message of anything thrown, for a log line. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
