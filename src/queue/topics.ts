// Topic operations behind DelayQueue: setting a config (with a new push secret when one is
// needed), one topic's stats, and pages of topics, read from the topic scripts' replies.
import { toBase64url } from "../domain/base64url";
import { DelayqError, parseInput } from "../domain/errors";
import type { TopicPage } from "../domain/results";
import { TopicConfig, TopicConfigPatch, TopicName, type TopicStats } from "../domain/schemas";
import { scopeRanges, scopeToLua, type TopicScope } from "../domain/scope";
import type { TopicRow } from "../redis/replies";
import type { Shared } from "./options";

/**
 * Validates and stores a topic's config, whole ("put") or in part ("patch"); answers it as
 * stored, and whether a push secret was generated. The caller checks the topic first.
 */
export async function setTopicConfig(
  shared: Shared,
  topic: string,
  input: unknown,
  mode: "put" | "patch",
): Promise<{ config: TopicConfig; secretGenerated: boolean }> {
  const parsed =
    mode === "put"
      ? parseInput(TopicConfig, input, "topic config")
      : parseInput(TopicConfigPatch, input, "topic config");
  const reply = await shared.scripts.run("configure", shared.scriptNow(), [
    topic,
    JSON.stringify(parsed),
    mode,
    newSecret(),
  ]);
  shared.wakeups.broadcast(topic);
  return { config: readConfig(reply.config), secretGenerated: reply.secretGenerated };
}

/** One topic's stats. The caller checks the topic first. */
export async function readTopicStats(shared: Shared, topic: string): Promise<TopicStats> {
  const [row] = await shared.scripts.run("topicStats", shared.scriptNow(), [topic]);
  return toStats(row as TopicRow);
}

/** A page of topics by name, with their stats: only those the scope allows. */
export async function readTopicPage(
  shared: Shared,
  scope: TopicScope,
  options: { after?: string; limit?: number },
): Promise<TopicPage> {
  const limit = options.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
    throw new DelayqError("invalid_request", "limit: must be an integer from 1 to 100");
  }
  if (options.after !== undefined) parseInput(TopicName, options.after, "cursor");
  // Only the topics the scope allows have their stats read (a scoped /metrics scrape cost every
  // topic's stats before); the cursor is the last name read. A scope of names and prefixes reads
  // within its ranges only, after the cursor.
  const after = options.after ?? "";
  const ranges = scopeRanges(scope);
  const bounds = ranges
    ? ranges
        .filter(([, to]) => after < to)
        .flatMap(([from, to], i) => [
          i === 0 && after !== "" && after >= from ? `(${after}` : `[${from}`,
          `(${to}`,
        ])
    : [after === "" ? "-" : `(${after}`, "+"];
  const page = await shared.scripts.run("listTopics", shared.scriptNow(), [
    after,
    limit,
    scopeToLua(scope),
    ...bounds,
  ]);
  const topics = page.topics.map((row) => toStats(row));
  return page.more && page.last
    ? { topics, cursor: page.last, hasMore: true }
    : { topics, hasMore: false };
}

function toStats(row: TopicRow): TopicStats {
  const stats: TopicStats = {
    topic: row.topic,
    counts: { delayed: row.delayed, ready: row.ready, reserved: row.reserved, dead: row.dead },
    config: readConfig(row.config),
  };
  if (row.oldestDueAt !== undefined) stats.oldestDueAt = row.oldestDueAt;
  if (stats.config.push) {
    stats.push = { delivered: row.delivered, failed: row.failed };
    // A push topic's due jobs not yet claimed are held back (rate, parallelism, a run's budget):
    // the earliest due time among waiting jobs is then theirs.
    stats.heldBack = row.ready;
    if (row.ready > 0 && row.oldestDueAt !== undefined) stats.heldBackSince = row.oldestDueAt;
  }
  return stats;
}

/** A topic config as stored (JSON written by Lua's cjson), "" for none. */
function readConfig(text: string): TopicConfig {
  const config = text ? (JSON.parse(text) as TopicConfig) : {};
  if (config.push === null) delete config.push;
  return config;
}

/** The deployment's cursor secret (scripts/topics.ts: cursorSecret), made if there is none. */
export function readCursorSecret(shared: Shared): Promise<string> {
  const candidate = toBase64url(crypto.getRandomValues(new Uint8Array(32)));
  return shared.scripts.run("cursorSecret", shared.scriptNow(), [candidate]);
}

/** A push secret: 32 random bytes, base64url, with a prefix that says what it is. */
function newSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `dqwh_${toBase64url(bytes)}`;
}
