// The calls of a partitioned deployment (partitions.ts): each script is sent to the partition
// that holds what it touches, split by partition when it names jobs or topics of several, or run
// in every partition and its answers merged when it looks across topics. docs/cluster.md has the
// layout and each operation's cost.
import { DelayqError } from "../domain/errors";
import type { ScriptName } from "./lua/scripts";
import type { AddReply } from "./lua/scripts/add";
import { CLAIM_WINDOW_MS, type OutboxPushed } from "./lua/scripts/partitions";
import type { ClaimReply } from "./lua/scripts/push";
import type { Partitions } from "./partitions";
import type { PartitionCall, ReplyOf, ScriptRunner } from "./runner";

type Args = readonly (string | number)[];
type Timed<R> = Promise<{ reply: R; now: number }>;

/** Scripts of what is not a topic's, or of delayq's own topics: the home partition's. */
const HOME = new Set<ScriptName>([
  "cursorSecret",
  "sessionStart",
  "sessionRead",
  "sessionEnd",
  "watchStart",
  "watchRead",
  "watchPolled",
  "watchStop",
  "watchList",
  "tokenWatchCounts",
  "scheduleSave",
  "scheduleGet",
  "scheduleDelete",
  "scheduleList",
  "schedulesDue",
  "scheduleFire",
  "layoutMark",
]);

/** Home scripts that may leave jobs for other partitions in the outbox (lib/jobs.ts: addJob). */
const WRITES_OUTBOX = new Set<ScriptName>([
  "watchStart",
  "watchPolled",
  "scheduleSave",
  "scheduleDelete",
  "scheduleFire",
]);

/** Scripts whose first argument is the topic they work on. */
const BY_TOPIC = new Set<ScriptName>(["kick", "deleteDead", "list", "configure"]);

/** Scripts whose first argument is the one job they work on. */
const BY_ID = new Set<ScriptName>([
  "get",
  "delete",
  "touch",
  "release",
  "bury",
  "reschedule",
  "promote",
]);

/**
 * Scripts of many jobs, each a group of `width` arguments starting with its id after `header`
 * arguments, answering one value per group (published: a list of its own, concatenated).
 */
const PER_JOB: Partial<Record<ScriptName, { header: number; width: number }>> = {
  finish: { header: 1, width: 2 },
  settle: { header: 0, width: 6 },
  stillHeld: { header: 0, width: 2 },
  published: { header: 0, width: 3 },
};

/** An add that meets another's claim in flight looks again this often, this many times. */
const IN_FLIGHT_TRIES = 5;
const IN_FLIGHT_WAIT_MS = 20;

/** Outbox entries applied a call, and ended ids forgotten a tick per partition. */
const OUTBOX_PAGE = 100;
const ENDED_PAGE = 1000;

/** Scripts the router composes itself (each its own method of Router). */
const COMPOSED = new Set<ScriptName>([
  "add",
  "pop",
  "topicStats",
  "renotice",
  "tick",
  "claim",
  "handOff",
  "notices",
  "listTopics",
]);

/** The router's own bookkeeping, run in a partition it picks (scripts/partitions.ts). */
const BOOKKEEPING = new Set<ScriptName>([
  "idClaim",
  "idWhere",
  "idForget",
  "endedTake",
  "outboxRead",
  "outboxApply",
  "outboxDone",
]);

/** How a script is routed on a partitioned deployment; undefined for one it cannot route. */
export function routeOf(
  name: ScriptName,
): "home" | "topic" | "id" | "jobs" | "composed" | "bookkeeping" | undefined {
  if (HOME.has(name)) return "home";
  if (BY_TOPIC.has(name)) return "topic";
  if (BY_ID.has(name)) return "id";
  if (PER_JOB[name]) return "jobs";
  if (COMPOSED.has(name)) return "composed";
  if (BOOKKEEPING.has(name)) return "bookkeeping";
  return undefined;
}

export function router(layout: Partitions, callIn: PartitionCall): ScriptRunner["runTimed"] {
  const r = new Router(layout, callIn);
  return (name, now, args) => r.run(name, now, args);
}

class Router {
  /** Where the sequential fan-outs (claim, notices) start, so no partition always comes last. */
  private turn = 0;

  constructor(
    private readonly layout: Partitions,
    private readonly callIn: PartitionCall,
  ) {}

  async run<N extends ScriptName>(name: N, now: number | undefined, args: Args): Timed<ReplyOf<N>> {
    const any = this as Router;
    if (HOME.has(name)) {
      const result = await this.callIn(0, name, now, args);
      // A watch read as concluded has its outcome jobs in their topics: what its conclusion left
      // in the outbox is applied before the read answers (by this call, if the concluding one has
      // not yet). After the read, not before: a conclusion between the two would be answered with
      // its outcomes still in the outbox.
      if (name === "watchRead") await this.drainOutbox(now);
      if (WRITES_OUTBOX.has(name)) {
        // Push topics the outbox's jobs went to are told as the script's own would be.
        const pushed = await this.drainOutbox(now);
        const reply = result.reply as { pushed?: OutboxPushed[] } | undefined;
        if (pushed.length > 0 && Array.isArray(reply?.pushed)) reply.pushed.push(...pushed);
      }
      return result;
    }
    if (BY_TOPIC.has(name))
      return this.callIn(this.layout.ofTopic(String(args[0])), name, now, args);
    if (BY_ID.has(name)) {
      const [at] = await this.where([String(args[0])], now);
      return this.callIn(at ?? 0, name, now, args);
    }
    const perJob = PER_JOB[name];
    if (perJob) return this.perJob(name, now, args, perJob.header, perJob.width);
    switch (name) {
      case "add":
        return any.add(now, args) as Timed<ReplyOf<N>>;
      case "pop":
        return any.pop(now, args) as Timed<ReplyOf<N>>;
      case "topicStats":
        return this.perJob(name, now, args, 0, 1, (topic) => this.layout.ofTopic(topic));
      case "renotice":
        return any.renotice(now, args) as Timed<ReplyOf<N>>;
      case "tick":
        return any.tick(now, args) as Timed<ReplyOf<N>>;
      case "claim":
        return any.claim(now, args) as Timed<ReplyOf<N>>;
      case "handOff":
        return any.handOff(now, args) as Timed<ReplyOf<N>>;
      case "notices":
        return any.notices(now, args) as Timed<ReplyOf<N>>;
      case "listTopics":
        return any.listTopics(now, args) as Timed<ReplyOf<N>>;
      default:
        throw new Error(`The ${name} script has no route on a partitioned deployment`);
    }
  }

  /** The partition each id's job lives in (its index entry's, else its own partition). */
  where(ids: readonly string[], now: number | undefined): Promise<number[]> {
    return this.inIdPartitions("idWhere", ids, now, (i) => [ids[i] as string]);
  }

  /**
   * An index script (idWhere, idClaim) run in each id's own partition, one call per partition,
   * each id's argument group from `argsOf(its place)`: the partition each id's entry names.
   */
  private async inIdPartitions(
    name: "idWhere" | "idClaim",
    ids: readonly string[],
    now: number | undefined,
    argsOf: (i: number) => (string | number)[],
  ): Promise<number[]> {
    const out = new Array<number>(ids.length).fill(0);
    await Promise.all(
      groups(ids, (id) => this.layout.ofId(id)).map(async ([k, places]) => {
        const { reply } = await this.callIn(k, name, now, places.flatMap(argsOf));
        places.forEach((i, j) => {
          out[i] = Number(reply[j]);
        });
      }),
    );
    return out;
  }

  /**
   * A script of many jobs (or topics), split by the partition each group's first argument lives
   * in, one call per partition; the answers put back in the groups' order.
   */
  async perJob<N extends ScriptName>(
    name: N,
    now: number | undefined,
    args: Args,
    header: number,
    width: number,
    placeOf?: (first: string) => number,
  ): Timed<ReplyOf<N>> {
    const head = args.slice(0, header);
    const items: Args[] = [];
    for (let i = header; i < args.length; i += width) items.push(args.slice(i, i + width));
    const firsts = items.map((item) => String(item[0]));
    const places = placeOf ? firsts.map(placeOf) : await this.where(firsts, now);
    const replies = new Array<unknown>(items.length);
    const concat: unknown[] = [];
    let at = now ?? 0;
    await Promise.all(
      groups(items, (_, i) => places[i] as number).map(async ([k, indexes]) => {
        const part = await this.callIn(k, name, now, [
          ...head,
          ...indexes.flatMap((i) => items[i] as Args),
        ]);
        at = Math.max(at, part.now);
        const list = part.reply as unknown[];
        if (name === "published") concat.push(...list);
        else
          indexes.forEach((i, j) => {
            replies[i] = list[j];
          });
      }),
    );
    const reply = (name === "published" ? concat : replies) as ReplyOf<N>;
    return { reply, now: at || Date.now() };
  }

  /**
   * add: each id claimed in its own partition for its topic's (idClaim), then one add per
   * partition of the topics written. An id another topic's job holds answers idTaken with that
   * job's record, as on one keyspace; an index entry whose job is gone is taken over. An id the
   * call gives again for a topic of another partition is added after the rest, so that it meets
   * the job the first one wrote (not an add in flight: its own).
   */
  async add(now: number | undefined, args: Args): Timed<AddReply> {
    const head = args.slice(0, 3);
    const jobs: Args[] = [];
    for (let i = 3; i < args.length; i += 9) jobs.push(args.slice(i, i + 9));
    const ids = jobs.map((job) => String(job[0]));
    const targets = jobs.map((job) => this.layout.ofTopic(String(job[1])));
    const firsts = new Map<string, number>();
    const again: number[] = [];
    ids.forEach((id, i) => {
      const first = firsts.get(id);
      if (first === undefined) firsts.set(id, i);
      else if (targets[first] !== targets[i]) again.push(i);
    });
    if (again.length > 0) return this.addInTwo(now, head, jobs, again);
    const homes = await this.claim_(ids, targets, new Array(ids.length).fill(""), now);
    const taken = new Map<number, string | undefined>();
    for (const [i, home] of homes.entries()) {
      if (home !== targets[i]) {
        taken.set(i, await this.heldElsewhere(ids[i] as string, targets[i] as number, home, now));
      }
    }
    const out: AddReply = { jobs: new Array(jobs.length), pushed: [] };
    let at = now ?? 0;
    const writes = jobs.map((_, i) => i).filter((i) => taken.get(i) === undefined);
    await Promise.all(
      groups(writes, (i) => targets[i] as number).map(async ([k, places]) => {
        const indexes = places.map((p) => writes[p] as number);
        const part = await this.callIn(k, "add", now, [
          ...head,
          ...indexes.flatMap((i) => jobs[i] as Args),
        ]);
        at = Math.max(at, part.now);
        out.pushed.push(...part.reply.pushed);
        indexes.forEach((i, j) => {
          out.jobs[i] = part.reply.jobs[j] as AddReply["jobs"][number];
        });
      }),
    );
    for (const [i, record] of taken) {
      if (record !== undefined) out.jobs[i] = { code: "idTaken", record };
    }
    return { reply: out, now: at || Date.now() };
  }

  /** add of the jobs but `later`'s, then of `later`'s; the replies put back in the jobs' order. */
  private async addInTwo(
    now: number | undefined,
    head: Args,
    jobs: readonly Args[],
    later: readonly number[],
  ): Timed<AddReply> {
    const deferred = new Set(later);
    const sooner = jobs.map((_, i) => i).filter((i) => !deferred.has(i));
    const out: AddReply = { jobs: new Array(jobs.length), pushed: [] };
    let at = 0;
    for (const part of [sooner, later]) {
      const { reply, now: partNow } = await this.add(now, [
        ...head,
        ...part.flatMap((i) => jobs[i] as Args),
      ]);
      at = Math.max(at, partNow);
      out.pushed.push(...reply.pushed);
      part.forEach((i, j) => {
        out.jobs[i] = reply.jobs[j] as AddReply["jobs"][number];
      });
    }
    return { reply: out, now: at };
  }

  /**
   * The record of the job that holds `id` in partition `home`, another than the add's `target`.
   * No record there: an entry that outlived its job is taken over (answers undefined: the id is
   * the target's now), one of an add in flight is waited for a moment, then 503.
   */
  private async heldElsewhere(
    id: string,
    target: number,
    home: number,
    now: number | undefined,
  ): Promise<string | undefined> {
    for (let attempt = 0; attempt < IN_FLIGHT_TRIES; attempt++) {
      const { reply: stored } = await this.callIn(home, "get", now, [id]);
      if (stored !== undefined) return stored;
      const [again] = await this.claim_([id], [target], [String(home)], now);
      if (again === target) return undefined;
      await new Promise((resolve) => setTimeout(resolve, IN_FLIGHT_WAIT_MS));
    }
    throw new DelayqError(
      "redis_unavailable",
      `Another add of job id ${JSON.stringify(id)} to another topic is in flight, or stopped less than ${CLAIM_WINDOW_MS / 1000} s ago: retry it`,
    );
  }

  /** idClaim, each id in its own partition. */
  private claim_(
    ids: readonly string[],
    targets: readonly number[],
    stale: readonly string[],
    now: number | undefined,
  ): Promise<number[]> {
    return this.inIdPartitions("idClaim", ids, now, (i) => [
      ids[i] as string,
      targets[i] as number,
      stale[i] as string,
    ]);
  }

  /**
   * pop, in its topic's partition, with the jobs it finishes (ARGV[9..], pairs): a job whose
   * record is not there (another topic's, finished through this pop) is finished in its own.
   */
  async pop(now: number | undefined, args: Args): Timed<ReplyOf<"pop">> {
    const topic = String(args[0]);
    const result = await this.callIn(this.layout.ofTopic(topic), "pop", now, args);
    const lost = result.reply.finished
      .map((reply, i) => ({ reply, i }))
      .filter(({ reply }) => reply.code === "notFound");
    if (lost.length === 0) return result;
    const pairs = lost.flatMap(({ i }) => args.slice(5 + 2 * i, 7 + 2 * i));
    const again = await this.perJob("finish", now, [args[4] as string, ...pairs], 1, 2);
    lost.forEach(({ i }, j) => {
      const reply = again.reply[j];
      if (reply) result.reply.finished[i] = reply;
    });
    return result;
  }

  /** renotice: per topic, the topic, how many entries, then the entries. */
  async renotice(now: number | undefined, args: Args): Timed<undefined> {
    const byPart = new Map<number, (string | number)[]>();
    for (let i = 0; i < args.length; ) {
      const n = Number(args[i + 1]);
      const k = this.layout.ofTopic(String(args[i]));
      const list = byPart.get(k) ?? [];
      list.push(...args.slice(i, i + 2 + n));
      byPart.set(k, list);
      i += 2 + n;
    }
    await Promise.all([...byPart].map(([k, part]) => this.callIn(k, "renotice", now, part)));
    return { reply: undefined, now: now ?? Date.now() };
  }

  /**
   * tick: every partition's slice, added up; then the upkeep a partitioned deployment needs:
   * the ended jobs' index entries given their records' expiry, the outbox's jobs a crashed
   * caller left.
   */
  async tick(now: number | undefined, args: Args): Timed<ReplyOf<"tick">> {
    const answers = await available(
      this.partitions().map((k) => this.callIn(k, "tick", now, args)),
    );
    const slices = answers.filter((slice) => slice !== undefined);
    const sum = { ...(slices[0] as (typeof slices)[0]).reply };
    for (const { reply } of slices.slice(1)) {
      sum.promoted += reply.promoted;
      sum.expired += reply.expired;
      sum.died += reply.died;
      sum.topics += reply.topics;
      sum.more ||= reply.more;
      sum.pushDue ||= reply.pushDue;
      sum.noticesDue ||= reply.noticesDue;
      sum.schedulesDue ||= reply.schedulesDue;
    }
    // The upkeep the partitions' markers say waits (an idle tick: none); what a partition down
    // leaves waits for a later tick.
    const ended = answers.flatMap((answer, k) => (answer?.reply.upkeep.ended ? [k] : []));
    const outbox = answers[0]?.reply.upkeep.outbox === true;
    await available(
      [
        this.forgetEnded(ended, now),
        ...(outbox ? [this.drainOutbox(now).then(() => undefined)] : []),
      ],
      true,
    );
    sum.upkeep = { ended: false, outbox: false };
    return { reply: sum, now: Math.max(...slices.map((s) => s.now)) };
  }

  /**
   * The ended jobs of partitions `parts` whose index entries live elsewhere: those expire with
   * them.
   */
  async forgetEnded(parts: readonly number[], now: number | undefined): Promise<void> {
    await Promise.all(
      parts.map(async (k) => {
        const { reply: ids } = await this.callIn(k, "endedTake", now, [ENDED_PAGE]);
        await Promise.all(
          groups(ids, (id) => this.layout.ofId(id)).map(([p, places]) =>
            this.callIn(
              p,
              "idForget",
              now,
              places.map((i) => ids[i] as string),
            ),
          ),
        );
      }),
    );
  }

  /**
   * Applies the home partition's outbox (lib/jobs.ts: addJob): each job's id claimed, then the
   * jobs added (or fires taken back) in their topics' partitions, then the entries removed. At
   * least once: an entry applied twice meets its own job (an id that exists is left alone).
   */
  async drainOutbox(now: number | undefined): Promise<OutboxPushed[]> {
    const { reply: entries } = await this.callIn(0, "outboxRead", now, [OUTBOX_PAGE]);
    if (entries.length === 0) return [];
    const parsed = entries.map(
      (text) => JSON.parse(text) as { op: string; id: string; topic: string },
    );
    const targets = parsed.map((e) => this.layout.ofTopic(e.topic));
    const adds = parsed.map((_, i) => i).filter((i) => parsed[i]?.op === "add");
    const homes = await this.claim_(
      adds.map((i) => (parsed[i] as { id: string }).id),
      adds.map((i) => targets[i] as number),
      adds.map(() => ""),
      now,
    );
    // An id another topic's job holds is left alone, as addJob leaves an id that exists.
    const skip = new Set(adds.filter((i, j) => homes[j] !== targets[i]));
    const apply = parsed.map((_, i) => i).filter((i) => !skip.has(i));
    const applied = await Promise.all(
      groups(apply, (i) => targets[i] as number).map(([k, places]) =>
        this.callIn(
          k,
          "outboxApply",
          now,
          places.map((p) => entries[apply[p] as number] as string),
        ),
      ),
    );
    await this.callIn(0, "outboxDone", now, entries);
    return applied.flatMap((part) => part.reply);
  }

  /**
   * claim: one topic's partition when the call names a topic; else the partitions in turn, each
   * taking what the others left of the call's most jobs. A hand-off's share (ARGV[9], [10])
   * is home's, where handOff keeps its ledger.
   */
  async claim(now: number | undefined, args: Args): Timed<ClaimReply> {
    const only = String(args[4] ?? "");
    if (only !== "") return this.callIn(this.layout.ofTopic(only), "claim", now, args);
    let most = Number(args[1]);
    const topics = [] as ClaimedTopic[];
    const held: ClaimReply["held"] = [];
    let at = now ?? 0;
    let failure: unknown;
    let answered = 0;
    for (const k of this.inTurn()) {
      if (most <= 0) break;
      const rest = k === 0 ? args.slice(5) : [0, ""];
      let part: Awaited<Timed<ClaimReply>>;
      try {
        part = await this.callIn(k, "claim", now, [
          ...args.slice(0, 1),
          most,
          ...args.slice(2, 4),
          "",
          ...rest,
        ]);
      } catch (error) {
        // A partition down: the others' jobs are claimed meanwhile.
        if (!unavailable(error)) throw error;
        failure = error;
        continue;
      }
      answered += 1;
      at = Math.max(at, part.now);
      for (const topic of part.reply) {
        topics.push(topic);
        most -= topic.records.length;
      }
      held.push(...part.reply.held);
    }
    if (answered === 0 && failure !== undefined) throw failure;
    return { reply: Object.assign(topics, { held }), now: at || Date.now() };
  }

  /** handOff: one topic's partition when the call names one; else each's waves, added up. */
  async handOff(now: number | undefined, args: Args): Timed<ReplyOf<"handOff">> {
    const only = String(args[3] ?? "");
    if (only !== "") return this.callIn(this.layout.ofTopic(only), "handOff", now, args);
    const parts = await Promise.all(
      this.partitions().map((k) => this.callIn(k, "handOff", now, args)),
    );
    const runs = new Map<number, number>();
    for (const { reply } of parts) {
      for (const wave of reply) runs.set(wave.wave, (runs.get(wave.wave) ?? 0) + wave.runs);
    }
    const reply = [...runs].sort(([a], [b]) => a - b).map(([wave, n]) => ({ wave, runs: n }));
    return { reply, now: Math.max(...parts.map((p) => p.now)) };
  }

  /**
   * notices: the room shared between the partitions as the script shares a partition's between
   * its topics: each an even part of what is left (the first in turn the remainder), all at once;
   * what one leaves goes round again to those that used all of theirs and those not asked yet.
   * So a partition whose topics have notices by the thousand takes its part of a round, not the
   * round (of a round smaller than the partitions, those first in turn have a part). A topic a
   * call served has its next turn a fraction of a ms after the call's now: a later pass asks a
   * ms on, so that it may serve it again.
   */
  async notices(now: number | undefined, args: Args): Timed<ReplyOf<"notices">> {
    let room = Number(args[0]);
    let open = this.inTurn();
    const out: ReplyOf<"notices"> = [];
    let at = now ?? 0;
    for (let pass = 0; room > 0 && open.length > 0; pass++) {
      const passNow = now === undefined ? undefined : now + pass;
      const even = Math.floor(room / open.length);
      const parts = open.map((k, i) => [k, even + (i < room % open.length ? 1 : 0)] as const);
      const asked = parts.filter(([, part]) => part > 0);
      const answers = await available(
        asked.map(([k, part]) => this.callIn(k, "notices", passNow, [part, ...args.slice(1)])),
      );
      const full: number[] = [];
      answers.forEach((answer, i) => {
        // A partition down is left for the next round.
        if (answer === undefined) return;
        const [k, part] = asked[i] as (typeof asked)[number];
        at = Math.max(at, answer.now);
        out.push(...answer.reply);
        room -= answer.reply.length;
        if (answer.reply.length >= part) full.push(k);
      });
      open = [...parts.filter(([, part]) => part === 0).map(([k]) => k), ...full];
    }
    return { reply: out, now: at || Date.now() };
  }

  /**
   * listTopics: every partition's page after the same name, merged by name. The page ends where
   * the first partition with more to read stopped (past it that partition's names are not
   * known), or at the page's size.
   */
  async listTopics(now: number | undefined, args: Args): Timed<ReplyOf<"listTopics">> {
    const size = Number(args[1]);
    const parts = await Promise.all(
      this.partitions().map((k) => this.callIn(k, "listTopics", now, args)),
    );
    const stops = parts.filter((p) => p.reply.more).map((p) => p.reply.last);
    let cut = stops.length > 0 ? stops.sort()[0] : undefined;
    let rows = parts
      .flatMap((p) => p.reply.topics)
      .filter((row) => cut === undefined || row.topic <= cut)
      .sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : 0));
    let more = cut !== undefined;
    if (rows.length > size) {
      rows = rows.slice(0, size);
      cut = (rows[rows.length - 1] as (typeof rows)[0]).topic;
      more = true;
    }
    const last =
      cut ??
      parts
        .map((p) => p.reply.last)
        .sort()
        .pop() ??
      "";
    return {
      reply: { topics: rows, more, last },
      now: Math.max(...parts.map((p) => p.now)),
    };
  }

  private partitions(): number[] {
    return Array.from({ length: this.layout.count }, (_, k) => k);
  }

  private inTurn(): number[] {
    const start = this.turn++ % this.layout.count;
    return this.partitions().map((k) => (start + k) % this.layout.count);
  }
}

type ClaimedTopic = ClaimReply[number];

/** A failure that says a partition's master cannot answer now (503), not a bug. */
function unavailable(error: unknown): boolean {
  return error instanceof DelayqError && error.code === "redis_unavailable";
}

/**
 * The answers of calls to several partitions, in order, undefined for a partition that is
 * unavailable (its master down): work across partitions goes on without it. When every call
 * failed, or one failed otherwise (a bug), that failure is thrown; `all` takes the partitions
 * down as they are even then (upkeep a later call does again).
 */
async function available<T>(calls: Promise<T>[], all = false): Promise<(T | undefined)[]> {
  const settled = await Promise.allSettled(calls);
  const failures = settled.filter((r): r is PromiseRejectedResult => r.status === "rejected");
  const bug = failures.find((r) => !unavailable(r.reason));
  if (bug) throw bug.reason;
  if (failures.length === settled.length && failures[0] && !all) throw failures[0].reason;
  return settled.map((r) => (r.status === "fulfilled" ? r.value : undefined));
}

/** Items' places grouped by the partition `place` gives each: [partition, places in order]. */
function groups<T>(
  items: readonly T[],
  place: (item: T, i: number) => number,
): [number, number[]][] {
  const byPart = new Map<number, number[]>();
  items.forEach((item, i) => {
    const k = place(item, i);
    const list = byPart.get(k);
    if (list) list.push(i);
    else byPart.set(k, [i]);
  });
  return [...byPart];
}
