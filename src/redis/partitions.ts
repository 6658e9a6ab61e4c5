// Where a deployment's keys live: one keyspace (one hash tag), or N partitions spread over a Redis
// Cluster's masters, each a whole keyspace of its own holding the topics that hash to it.

import { WATCH_JOB_PREFIX } from "./keys";

/** Redis Cluster's hash slots. */
const SLOTS = 16384;

/**
 * Fibonacci hashing's multiplier, 1/φ: a name's partition is the fractional part of its djb2
 * times this, times N (lua/lib/index.ts computes the same in the same doubles). djb2 is linear,
 * so names that differ in a last character have neighbouring hashes; this scatters them.
 */
const SPREAD = 0.6180339887498949;

/** The most partitions a deployment may have (DQ_CLUSTER_PARTITIONS). */
export const MAX_PARTITIONS = 256;

/**
 * A deployment's partitions. Partition 0 is the home keyspace, tag `{<prefix>}` (the one
 * keyspace of a deployment with one partition, so N = 1 is the layout of one Redis): it also
 * holds everything that is not a topic's (payment and refund watches and their internal topics,
 * recurring schedules, dashboard sessions, the cursor secret). Partition k > 0 has the tag
 * `{<prefix>:<k>.<salt>}`, the salt chosen so that the N tags' slots lie in N equal ranges of
 * the slot space: on a cluster whose masters hold equal ranges each master holds N / masters
 * partitions.
 */
export type Partitions = {
  /** N. */
  count: number;
  /** Each partition's prefix: its keys' hash tag without the braces (keys.ts: keys). */
  prefixes: readonly string[];
  /** The partition of a topic; delayq's own topics (`__payments`, `__refunds`) are home's. */
  ofTopic(topic: string): number;
  /** The partition of a job id: where its index entry lives when its topic's is another. */
  ofId(id: string): number;
};

export function partitions(prefix: string, count: number): Partitions {
  if (!Number.isInteger(count) || count < 1 || count > MAX_PARTITIONS) {
    throw new Error(`Partitions must be a whole number from 1 to ${MAX_PARTITIONS}, not ${count}`);
  }
  const prefixes = [prefix];
  const home = slotOf(prefix);
  for (let k = 1; k < count; k++) prefixes.push(saltedPrefix(prefix, k, home, count));
  // Not djb2 mod N: mod a power of two that is the bytes' sum (33 is 1 mod 16), which puts
  // "t1" with "t10" and anagrams together.
  const hashed = (name: string) =>
    count === 1 ? 0 : Math.floor(((djb2(name) * SPREAD) % 1) * count);
  return {
    count,
    prefixes,
    ofTopic: (topic) => (topic.startsWith("__") ? 0 : hashed(topic)),
    // A watch's poll job lives with its watch, home's, and so do its outcomes' index entries.
    ofId: (id) => (id.startsWith(WATCH_JOB_PREFIX) ? 0 : hashed(id)),
  };
}

/** Partition k's prefix: the first salt whose tag's slot falls in the k-th of N ranges from home's. */
function saltedPrefix(prefix: string, k: number, home: number, count: number): string {
  const from = Math.floor((k * SLOTS) / count);
  const to = Math.floor(((k + 1) * SLOTS) / count);
  for (let salt = 0; ; salt++) {
    const candidate = `${prefix}:${k}.${salt.toString(36)}`;
    const offset = (slotOf(candidate) - home + SLOTS) % SLOTS;
    if (offset >= from && offset < to) return candidate;
  }
}

/** The hash slot of keys tagged `{tag}`: CRC16 (XMODEM) of the tag's UTF-8 bytes, mod 16384. */
export function slotOf(tag: string): number {
  let crc = 0;
  for (const byte of new TextEncoder().encode(tag)) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc % SLOTS;
}

/**
 * djb2 over a name's UTF-8 bytes, mod 2^32: the hash the scripts compute too (lua/lib/index.ts:
 * nameHash), so that a script knows which of its jobs' topics are another partition's.
 */
export function djb2(name: string): number {
  let h = 5381;
  for (const byte of new TextEncoder().encode(name)) h = (h * 33 + byte) % 4294967296;
  return h;
}
