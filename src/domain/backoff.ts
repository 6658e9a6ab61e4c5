// Backoff steps in TypeScript, the same rule as the Lua's (src/redis/lua/lib/transitions.ts):
// payment watches compute their next poll with it.
import { BACKOFF_SCHEDULES, type Backoff, MAX_DELAY_SECONDS } from "./schemas";

/**
 * How long to wait after the n-th failed attempt (n >= 1), ms: a number of seconds; a list (the
 * last step repeats); a named schedule; or min(max, delay * factor^(n-1)).
 */
export function backoffStepMs(spec: Backoff | undefined, n: number): number {
  if (spec === undefined) return 0;
  const seconds = (value: number) => Math.floor(value * 1000 + 0.5);
  if (typeof spec === "number") return seconds(spec);
  const steps: readonly number[] | undefined =
    typeof spec === "string" ? BACKOFF_SCHEDULES[spec] : Array.isArray(spec) ? spec : undefined;
  if (steps) return seconds(steps[n - 1] ?? steps[steps.length - 1] ?? 0);
  const exponential = spec as { delay: number; factor?: number; max?: number };
  const wait = exponential.delay * (exponential.factor ?? 2) ** (n - 1);
  return seconds(Math.min(wait, exponential.max ?? MAX_DELAY_SECONDS));
}
