// Reading and stopping watches of either kind: one by what it is known by, or a page of them (the
// dashboard), as far as the caller's access lets it see them.
import { DelayqError } from "../domain/errors";
import { type Access, accountAllows, scopeAllows } from "../domain/scope";
import type { KindTypes, WatchKind, WatchView } from "./watch-kind";
import { notFound } from "./watch-records";
import type { PaymentsOptions } from "./watch-types";

type Reads = Pick<PaymentsOptions, "scripts" | "clock">;

/** What reads ask of a kind. */
type ReadKind<T extends KindTypes> = Pick<
  WatchKind<T>,
  "name" | "index" | "idOf" | "numberOf" | "viewOf"
>;

/**
 * Whether a caller with `access` sees a watch: its account is one the caller may watch and it
 * notifies only topics the caller may act on (a watch of two tenants' topics is the operator's).
 */
export function visible(
  watch: Pick<WatchView, "provider" | "account" | "notify">,
  access: Access,
): boolean {
  return (
    accountAllows(access.accounts, watch.provider, watch.account) &&
    watch.notify.every((topic) => scopeAllows(access.scope, topic))
  );
}

/**
 * Watches of a kind newest first, a page at a time (the dashboard's panel): only those `access`
 * sees, so a page may hold fewer than `limit`; `cursor` goes on.
 */
export async function listWatches<T extends KindTypes>(
  kind: ReadKind<T>,
  options: Reads,
  page: { cursor?: string; limit: number } & Access,
): Promise<{ watches: T["view"][]; cursor?: string }> {
  const { cursor = "" } = page;
  if (cursor !== "" && !/^\d{1,16}\|[a-z2-7]{26}$/.test(cursor)) {
    throw new DelayqError(
      "invalid_request",
      "cursor: not one this listing gave; start again from the first page",
    );
  }
  const clock = options.clock ?? Date.now;
  const listed = await options.scripts.run("watchList", clock(), [cursor, page.limit, kind.index]);
  const watches = listed.watches.map(kind.viewOf).filter((watch) => visible(watch, page));
  return listed.cursor ? { watches, cursor: listed.cursor } : { watches };
}

/** A watch `access` sees (one it does not see is not found, as one that does not exist). */
export async function getWatch<T extends KindTypes>(
  kind: ReadKind<T>,
  options: Reads,
  key: T["key"],
  access: Access,
): Promise<T["view"]> {
  const clock = options.clock ?? Date.now;
  // An account not its own is not even read: its watches are none of this caller's business.
  const stored =
    accountAllows(access.accounts, key.provider, key.account) &&
    (await options.scripts.run("watchRead", clock(), [await kind.idOf(key)]));
  const watch = stored ? kind.viewOf(stored) : undefined;
  if (!watch || !visible(watch, access)) throw notFound(kind.name, key, kind.numberOf(key));
  return watch;
}

/** Stops a watch `access` sees; it reads `stopped` while it is retained. */
export async function stopWatch<T extends KindTypes>(
  kind: ReadKind<T>,
  options: Reads,
  key: T["key"],
  access: Access,
): Promise<void> {
  await getWatch(kind, options, key, access);
  const clock = options.clock ?? Date.now;
  await options.scripts.run("watchStop", clock(), [await kind.idOf(key)]);
}
