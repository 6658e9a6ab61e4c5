// Moves a deployment written in one keyspace (DQ_CLUSTER_PARTITIONS=1, every key under
// `{<prefix>}`) to N partitions (partitions.ts), while the service is stopped: each topic of
// another partition than home's, with its keys, its entries in the cross-topic sets and its job
// records, goes to its partition; then home's `layout` key says N. Plain commands, no scripts:
// every step writes the new copy before it deletes the old, so a run stopped anywhere loses
// nothing and a second run finishes the job (functions/migrate-cluster.ts runs it).
import type { Cluster, Redis } from "ioredis";
import { CLAIM_AHEAD_MS } from "../domain/push";
import type { Logger } from "../log";
import { KEY_LAYOUT, type Keys, keys, SCHEDULE_MARKERS } from "./keys";
import { type Partitions, partitions } from "./partitions";
import { decodeMeta } from "./record";

/** A connection to the deployment's Redis: one server, or a Redis Cluster. */
export type MigrateClient = Redis | Cluster;
type Pipeline = ReturnType<MigrateClient["pipeline"]>;

export type MigrateOptions = {
  redis: MigrateClient;
  /** DQ_PREFIX. */
  prefix: string;
  /** N: the partitions to spread the topics over (more than one). */
  partitions: number;
  /** Where progress and the summary go, as the service's JSON lines. @default nowhere */
  log?: Logger;
  /** Keys (records, ids, slot lists) a call reads or writes at most. @default 1000 */
  page?: number;
};

export type MigrateSummary = {
  /** "done": moved (or found moved) and marked; "marked": home said N already, nothing done. */
  outcome: "done" | "marked";
  /** Topics of other partitions than home's, moved. */
  topics: number;
  /** Per-topic keys (indexes, config, counters, slot lists) moved. */
  keys: number;
  /** Job records moved to their topics' partitions. */
  records: number;
  /** Index entries written (`i:<id>`, for jobs whose ids are another partition's). */
  indexEntries: number;
  /** Failure notices earlier versions queued in one list, moved into their topics' lists. */
  legacyNotices: number;
};

/** The run cannot go on: the message says why and what to do. */
export class MigrateRefused extends Error {}

/** The per-topic keys' layouts (KEY_LAYOUT entries that embed the topic), slots' zset last. */
const TOPIC_KEYS = (Object.keys(KEY_LAYOUT) as (keyof typeof KEY_LAYOUT)[])
  .filter((name) => KEY_LAYOUT[name].includes("<topic>"))
  .sort((a, b) => Number(a === "slots") - Number(b === "slots"));

/** The cross-topic sorted sets a topic has a member in, named alike in every partition. */
const TOPIC_SETS = ["schedule", "topics", "pushTopics", "claims", "noticing"] as const;

export async function migrateCluster(options: MigrateOptions): Promise<MigrateSummary> {
  const { redis, prefix } = options;
  if (!Number.isInteger(options.partitions) || options.partitions < 2) {
    throw new MigrateRefused(
      `DQ_CLUSTER_PARTITIONS must be more than 1 to move to (it is ${options.partitions}): one partition is the layout the deployment has`,
    );
  }
  const run = new Migration(redis, partitions(prefix, options.partitions), options);
  return run.run();
}

class Migration {
  private readonly log: Logger;
  private readonly page: number;
  private readonly key: Keys[];
  private readonly home: Keys;
  private readonly summary: MigrateSummary = {
    outcome: "done",
    topics: 0,
    keys: 0,
    records: 0,
    indexEntries: 0,
    legacyNotices: 0,
  };

  constructor(
    private readonly redis: MigrateClient,
    private readonly layout: Partitions,
    options: MigrateOptions,
  ) {
    this.log = options.log ?? (() => {});
    this.page = options.page ?? 1000;
    this.key = layout.prefixes.map((p) => keys(p));
    this.home = this.key[0] as Keys;
  }

  async run(): Promise<MigrateSummary> {
    const n = this.layout.count;
    const mark = await this.redis.get(this.home.layout);
    if (mark !== null && Number(mark) === n) {
      this.log({
        level: "info",
        event: "migrate_nothing_to_do",
        message: `Redis holds this deployment's keys in ${n} partitions already: nothing to move`,
        partitions: n,
      });
      return { ...this.summary, outcome: "marked" };
    }
    if (mark !== null && Number(mark) > 1) {
      throw new MigrateRefused(
        `Redis holds this deployment's keys spread over ${mark} partitions already, not ${n}: a deployment keeps its partitions for life; set DQ_CLUSTER_PARTITIONS=${mark}`,
      );
    }
    this.log({
      level: "info",
      event: "migrate_started",
      message: `Moving the topics of one keyspace to ${n} partitions: keep the service stopped until this ends`,
      partitions: n,
    });
    // Before any record moves: the notices' topics are read from the records, still home's.
    await this.legacyNotices();
    const topics = (await this.topics()).filter((topic) => this.layout.ofTopic(topic) !== 0);
    for (const topic of topics) {
      await this.moveTopic(topic);
      this.summary.topics++;
    }
    // Ended records (in no index), and index entries of jobs that stay home.
    await this.sweepRecords();
    // Last, so that a run stopped before finds the topics again by their memberships.
    for (let i = 0; i < topics.length; i += this.page) {
      await this.moveMemberships(topics.slice(i, i + this.page));
    }
    await this.dropIdleMarkers();
    await this.redis.set(this.home.layout, String(n));
    this.log({ level: "info", event: "migrate_done", partitions: n, ...this.summary });
    return this.summary;
  }

  /** Every topic home knows of: in its topic sets, bar the schedule's markers. */
  private async topics(): Promise<string[]> {
    const found = new Set<string>();
    for (const set of TOPIC_SETS) {
      for (let at = 0; ; at += this.page) {
        const names = await this.redis.zrange(
          this.home[set],
          String(at),
          String(at + this.page - 1),
        );
        for (const name of names) if (!name.startsWith("~")) found.add(name);
        if (names.length < this.page) break;
      }
    }
    return [...found].sort();
  }

  /** A topic's job records, then its slot lists, then its other keys (the slots' zset last). */
  private async moveTopic(topic: string): Promise<void> {
    const k = this.layout.ofTopic(topic);
    const from = this.home;
    const to = this.key[k] as Keys;
    for (const zset of ["delayed", "ready", "reserved", "dead"] as const) {
      await this.pages(
        (at) => this.redis.zrange(from[zset](topic), String(at), String(at + this.page - 1)),
        (ids) => this.moveRecords(ids),
      );
    }
    const starts = new Set<string>();
    await this.pages(
      (at) => this.redis.zrange(from.slots(topic), String(at), String(at + this.page - 1)),
      async (page) => {
        for (const start of page) starts.add(start);
        const lists = page.map((start) => `${from.slots(topic)}:${start}`);
        for (const list of lists) {
          await this.pages(
            (at) => this.redis.lrange(list, at, at + this.page - 1),
            (ids) => this.moveRecords(ids),
          );
        }
      },
    );
    const lists = [...starts].map((s) => [`${from.slots(topic)}:${s}`, `${to.slots(topic)}:${s}`]);
    for (let i = 0; i < lists.length; i += this.page) {
      await this.moveKeys(lists.slice(i, i + this.page) as [string, string][]);
    }
    await this.moveKeys(
      TOPIC_KEYS.map((name) => [
        (from[name] as (t: string) => string)(topic),
        (to[name] as (t: string) => string)(topic),
      ]),
    );
    this.log({ level: "info", event: "migrate_topic", topic, partition: k });
  }

  /** Reads pages of `read` (from an offset) until one is short, giving each to `use`. */
  private async pages(
    read: (at: number) => Promise<string[]>,
    use: (page: string[]) => Promise<void>,
  ): Promise<void> {
    for (let at = 0; ; at += this.page) {
      const page = await read(at);
      if (page.length > 0) await use(page);
      if (page.length < this.page) return;
    }
  }

  /**
   * Keys of home (`from`) to partition k's names (`to`), each as DUMP gives it with its expiry:
   * RESTORE (REPLACE: a copy of a stopped run's is written again), then home's DEL. A key home
   * lacks was moved already, or never was.
   */
  private async moveKeys(pairs: [from: string, to: string][]): Promise<void> {
    if (pairs.length === 0) return;
    const read = this.redis.pipeline();
    for (const [from] of pairs) read.dumpBuffer(from).pttl(from);
    const found = settled(await read.exec());
    const write = this.redis.pipeline();
    const moved: string[] = [];
    pairs.forEach(([from, to], i) => {
      const dump = found[2 * i] as Buffer | null;
      const ttl = Number(found[2 * i + 1]);
      if (dump === null || ttl === -2) return;
      write.restore(to, ttl > 0 ? ttl : 0, dump, "REPLACE");
      moved.push(from);
    });
    if (moved.length === 0) return;
    settled(await write.exec());
    settled(
      await this.redis
        .pipeline()
        .del(...moved)
        .exec(),
    );
    this.summary.keys += moved.length;
  }

  /**
   * Job records of home, by id: each record of another partition's topic is written there (with
   * its expiry), its index entry in its id's partition when that is another (with the record's
   * expiry), then home's copy deleted. A record that stays home gets its index entry when its id
   * is another partition's. An id without a record here was moved already, or ended and expired.
   * An entry is `<partition>|<ms>` as idClaim writes it (scripts/partitions.ts), the ms the
   * move's: the job exists, so no add can take the id over. Jobs whose ids are their topics'
   * partition's get none: idClaim and idWhere find their records there.
   */
  private async moveRecords(ids: readonly string[]): Promise<void> {
    const home = this.home;
    const claimed = Date.now();
    const read = this.redis.pipeline();
    for (const id of ids) read.getBuffer(home.job(id)).pttl(home.job(id));
    const found = settled(await read.exec());
    const writes = new Pipelines(this.redis);
    const moved: string[] = [];
    let indexed = 0;
    ids.forEach((id, i) => {
      const raw = found[2 * i] as Buffer | null;
      const ttl = Number(found[2 * i + 1]);
      if (raw === null || ttl === -2) return;
      const cut = raw.indexOf(10);
      const meta = decodeMeta(raw.subarray(0, cut < 0 ? raw.length : cut).toString("utf8"));
      const k = this.layout.ofTopic(meta.topic);
      const set = (pipe: Pipeline, name: string, value: string | Buffer) =>
        ttl > 0 ? pipe.set(name, value, "PX", ttl) : pipe.set(name, value);
      const at = this.layout.ofId(id);
      if (at !== k) {
        set(writes.in(at), (this.key[at] as Keys).jobIndex(id), `${k}|${claimed}`);
        indexed++;
      }
      if (k === 0) return;
      set(writes.in(k), (this.key[k] as Keys).job(id), raw);
      moved.push(home.job(id));
    });
    await writes.exec();
    if (moved.length > 0)
      settled(
        await this.redis
          .pipeline()
          .del(...moved)
          .exec(),
      );
    this.summary.records += moved.length;
    this.summary.indexEntries += indexed;
  }

  /**
   * Every record left home (ended jobs, in no index; jobs of home's topics), by a SCAN of
   * `{prefix}:j:*` on every master, 1000 keys a call.
   */
  private async sweepRecords(): Promise<void> {
    const pattern = `${this.home.job("")}*`;
    const from = this.home.job("").length;
    for (const node of masters(this.redis)) {
      let cursor = "0";
      do {
        const [next, found] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
        cursor = next;
        // A master that does not hold home's slot has no such key; SCAN answers what it holds.
        if (found.length > 0) await this.moveRecords(found.map((name) => name.slice(from)));
      } while (cursor !== "0");
    }
  }

  /**
   * The topics' members of the cross-topic sets (schedule, topics, push:topics, push:claims,
   * push:noticing), each with its score, to their partitions' sets; a push claim and a noticing
   * entry bring the schedule's markers along there (ZADD LT, as the scripts keep them). Then
   * home's members go.
   */
  private async moveMemberships(topics: readonly string[]): Promise<void> {
    const home = this.home;
    const read = this.redis.pipeline();
    for (const topic of topics) for (const set of TOPIC_SETS) read.zscore(home[set], topic);
    const scores = settled(await read.exec());
    const writes = new Pipelines(this.redis);
    const gone = new Map<string, string[]>();
    topics.forEach((topic, i) => {
      const k = this.layout.ofTopic(topic);
      const to = this.key[k] as Keys;
      TOPIC_SETS.forEach((set, j) => {
        const score = scores[i * TOPIC_SETS.length + j] as string | null;
        if (score === null) return;
        const pipe = writes.in(k);
        pipe.zadd(to[set], "LT", score, topic);
        if (set === "claims") {
          pipe.zadd(to.schedule, "LT", Number(score) - CLAIM_AHEAD_MS, SCHEDULE_MARKERS.push);
        }
        if (set === "noticing") pipe.zadd(to.schedule, "LT", score, SCHEDULE_MARKERS.notices);
        gone.set(home[set], [...(gone.get(home[set]) ?? []), topic]);
      });
    });
    await writes.exec();
    if (gone.size === 0) return;
    const remove = this.redis.pipeline();
    for (const [set, members] of gone) remove.zrem(set, ...members);
    settled(await remove.exec());
  }

  /** Home's schedule markers of push claims and notices, when none of home's topics has any. */
  private async dropIdleMarkers(): Promise<void> {
    const home = this.home;
    const [claims, noticing] = settled(
      await this.redis.pipeline().zcard(home.claims).zcard(home.noticing).exec(),
    );
    const idle = [
      ...(claims === 0 ? [SCHEDULE_MARKERS.push] : []),
      ...(noticing === 0 ? [SCHEDULE_MARKERS.notices] : []),
    ];
    if (idle.length > 0) await this.redis.zrem(home.schedule, ...idle);
  }

  /**
   * Notices earlier versions queued in one list for every topic (`push:notices`, and their
   * retries in `push:notices:retry`): each into its topic's own list in home, as the notices
   * script does, so that the topic's keys take them along. One whose record is gone is dropped.
   */
  private async legacyNotices(): Promise<void> {
    const home = this.home;
    const now = Date.now();
    for (const [list, retry] of [
      [home.legacyNotices, false],
      [home.legacyNoticeRetries, true],
    ] as const) {
      for (;;) {
        const entries = await this.redis.lrange(list, 0, this.page - 1);
        if (entries.length === 0) break;
        const parsed = entries.map((entry) => legacyEntry(entry, retry, now));
        const read = this.redis.pipeline();
        for (const { id } of parsed) read.getBuffer(home.job(id));
        const records = settled(await read.exec());
        const write = this.redis.pipeline();
        parsed.forEach(({ id, due, first }, i) => {
          const raw = records[i] as Buffer | null;
          if (raw === null) return;
          const cut = raw.indexOf(10);
          const topic = decodeMeta(
            raw.subarray(0, cut < 0 ? raw.length : cut).toString("utf8"),
          ).topic;
          if (retry) write.rpush(home.topicNoticeRetries(topic), `${due}|${first}|${id}`);
          else write.rpush(home.topicNotices(topic), `${due}|${id}`);
          write.zadd(home.noticing, "LT", due, topic);
          this.summary.legacyNotices++;
        });
        write.ltrim(list, entries.length, -1);
        settled(await write.exec());
      }
    }
  }
}

/** A legacy notice's parts: a bare id, `<ms>|<id>`, or a retry's `[<due>|]<first>|<id>`. */
function legacyEntry(
  entry: string,
  retry: boolean,
  now: number,
): { id: string; due: number; first: number } {
  const parts = entry.split("|");
  const id = parts.pop() as string;
  const times = parts.map((p) => (Number.isFinite(Number(p)) && p !== "" ? Number(p) : now));
  if (!retry) return { id, due: times[0] ?? now, first: times[0] ?? now };
  if (times.length >= 2) return { id, due: times[0] as number, first: times[1] as number };
  return { id, due: times[0] ?? now, first: times[0] ?? now };
}

/** A pipeline per partition (a cluster's pipeline keeps to one slot's node), run together. */
class Pipelines {
  private readonly byPartition = new Map<number, Pipeline>();

  constructor(private readonly redis: MigrateClient) {}

  in(k: number): Pipeline {
    let pipe = this.byPartition.get(k);
    if (!pipe) {
      pipe = this.redis.pipeline();
      this.byPartition.set(k, pipe);
    }
    return pipe;
  }

  async exec(): Promise<void> {
    await Promise.all([...this.byPartition.values()].map(async (p) => settled(await p.exec())));
  }
}

/** The masters to SCAN: a cluster's, or the one server. */
function masters(redis: MigrateClient): Redis[] {
  return "nodes" in redis && typeof redis.nodes === "function"
    ? (redis as Cluster).nodes("master")
    : [redis as Redis];
}

/** A pipeline's replies, the first error thrown (a run stopped there is run again). */
function settled(results: [Error | null, unknown][] | null): unknown[] {
  if (results === null) throw new Error("Redis discarded the pipeline");
  return results.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}
