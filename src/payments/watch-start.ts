// Starting a watch of either kind (DESIGN §4): the caller's access checked, the watch's spec built
// from its input (by the kind) and stored with its first poll in one script; idempotent by what
// the watch is known by.
import { backoffStepMs } from "../domain/backoff";
import { DelayqError, parseInput } from "../domain/errors";
import {
  DEFAULT_MAX_WATCHES_PER_TOKEN,
  MAX_METADATA_BYTES,
  MAX_WATCH_MS,
  MIN_POLL_MS,
  scheduleProblem,
} from "../domain/payments";
import { RawJson } from "../domain/raw-json";
import type { Backoff } from "../domain/schemas";
import { type Access, accountAllows, scopeAllows } from "../domain/scope";
import type { Run } from "../run/run";
import { soon, type Work } from "../run/work";
import { checkAccount } from "./watch-accounts";
import type { KindTypes, WatchInputBase, WatchKind } from "./watch-kind";
import type { PaymentsOptions } from "./watch-types";

export type Started<V> = {
  created: boolean;
  watch: V;
  /** The polls due within seconds, claimed by the request that started the watch. */
  work: Work[];
};

/**
 * Starts a watch of `kind`; idempotent by what it is known by. The caller's access must allow the
 * account and every notify topic. One watched already, for topics the caller may not see, is
 * `<kind>_exists` (and whatever else the kind's checkSame refuses).
 */
export async function startWatch<T extends KindTypes>(
  kind: WatchKind<T>,
  options: PaymentsOptions,
  run: Run,
  input: unknown,
  access: Access,
): Promise<Started<T["view"]>> {
  const watch = parseInput(kind.input, input, `${kind.name} watch`);
  checkAccess(watch, access, `${kind.thing}s`);
  checkAccount(options, watch.provider, watch.account, access.accounts); // unknown_account first
  const now = run.clock();
  const spec = kind.specOf(options, watch, now);
  const metadata = metadataText(watch.metadata);
  const firstDue = Math.min(now + backoffStepMs(spec.schedule, 1), spec.deadline);
  const key = kind.keyOf(spec);
  const cap = options.maxWatchesPerToken ?? DEFAULT_MAX_WATCHES_PER_TOKEN;
  const started = await options.scripts.run("watchStart", now, [
    await kind.idOf(key),
    JSON.stringify(spec),
    spec.deadline,
    firstDue,
    JSON.stringify(spec.schedule),
    JSON.stringify(spec.notify),
    metadata,
    kind.topicConfig,
    kind.topic,
    kind.index,
    access.tokenId ?? "",
    cap,
  ]);
  if ("tooMany" in started) {
    throw new DelayqError(
      "too_many_watches",
      `This token has ${started.tooMany} watches polling (payments and refunds together), as ` +
        `many as it may (DQ_MAX_WATCHES_PER_TOKEN=${cap}): stop some, or wait for some to end`,
    );
  }
  const { created, watch: stored } = started;
  const view = kind.viewOf(stored);
  // Watched already, for topics this token may not see: say only that, as an add of an id
  // another topic uses does (the watch, its topics and metadata stay hidden).
  if (!created && !view.notify.every((topic) => scopeAllows(access.scope, topic))) {
    throw new DelayqError(
      `${kind.name}_exists`,
      `${spec.provider} ${kind.thing} ${kind.numberOf(key)} of account ${spec.account} is ` +
        "watched already, for topics this token may not act on",
    );
  }
  if (!created) kind.checkSame?.(spec, view);
  return { created, watch: view, work: created ? [soon(kind.topic, now)] : [] };
}

/**
 * Before the account is looked up, so that a token learns nothing of accounts not its own: the
 * account and every notify topic must be the caller's. `what`: what is watched ("orders",
 * "refunds").
 */
export function checkAccess(
  watch: Pick<WatchInputBase, "provider" | "account" | "notify">,
  { scope, accounts }: Access,
  what: string,
): void {
  if (!accountAllows(accounts, watch.provider, watch.account)) {
    throw new DelayqError(
      "forbidden",
      `This token may not watch ${what} of ${watch.provider} account "${watch.account}" ` +
        `(its DQ_TOKENS entry would need the pattern ${watch.provider}/${watch.account})`,
    );
  }
  for (const topic of watch.notify) {
    if (!scopeAllows(scope, topic)) {
      throw new DelayqError("forbidden", `This token may not act on topic "${topic}"`);
    }
  }
}

/**
 * A new watch's schedule and deadline, the kind's defaults where its input gives none: the
 * deadline in the future (at most MAX_WATCH_MS ahead), every wait of the schedule at least
 * minPollMs (DQ_MIN_POLL_MS).
 */
export function timesOf(
  options: Pick<PaymentsOptions, "minPollMs">,
  input: Pick<WatchInputBase, "schedule" | "deadline">,
  now: number,
  defaults: { schedule: Backoff; watchMs: number },
): { schedule: Backoff; deadline: number } {
  const deadline = input.deadline ?? now + defaults.watchMs;
  if (deadline <= now) {
    throw new DelayqError("invalid_request", "deadline: must be in the future");
  }
  if (deadline > now + MAX_WATCH_MS) {
    throw new DelayqError(
      "invalid_request",
      `deadline: must be at most ${MAX_WATCH_MS / 86_400_000} days ahead, by ` +
        `${new Date(now + MAX_WATCH_MS).toISOString()} (a watch polls its provider until then)`,
    );
  }
  const schedule = input.schedule ?? defaults.schedule;
  const problem = scheduleProblem(schedule, options.minPollMs ?? MIN_POLL_MS);
  if (problem) throw new DelayqError("invalid_request", problem);
  return { schedule, deadline };
}

/** The metadata as its JSON text, within MAX_METADATA_BYTES. */
export function metadataText(metadata: unknown): string {
  const text = metadata instanceof RawJson ? metadata.text : JSON.stringify(metadata ?? null);
  const bytes = new TextEncoder().encode(text).length;
  if (bytes > MAX_METADATA_BYTES) {
    throw new DelayqError(
      "payload_too_large",
      `metadata is ${bytes} bytes of JSON; the limit is ${MAX_METADATA_BYTES} (it ` +
        "rides in every outcome job: keep an id there and the rest in your own store)",
    );
  }
  return text;
}
