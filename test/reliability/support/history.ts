// The history checker: what producers and consumers saw, checked against delayq's guarantees.
// Server times (a reservation's start, a due time) come from the job records; client times from
// the same machine's clock, taken before a request is sent and after its answer arrives.

export type HistoryEvent =
  /** An add the API acknowledged. */
  | { type: "add"; id: string; dueAt: number; ackAt: number }
  /** A delete the API acknowledged; `sentAt` is before the request left. */
  | { type: "delete"; id: string; sentAt: number; ackAt: number }
  /** A job a consumer received from pop: the reservation's start (server), its end, its due time. */
  | {
      type: "deliver";
      id: string;
      receipt: string;
      reservedAt: number;
      until: number;
      dueAt: number;
      consumer: string;
    }
  /** A release about to be sent (logged first, so a kill cannot hide it). */
  | { type: "release-sent"; id: string; receipt: string; sentAt: number }
  /** A finish about to be sent. */
  | { type: "finish-sent"; id: string; receipt: string; sentAt: number }
  /** A finish the API acknowledged. */
  | { type: "finish"; id: string; receipt: string; sentAt: number; ackAt: number };

export type Violation = { rule: string; id: string; detail: string };

export type CheckResult = {
  violations: Violation[];
  /** Figures for the report. */
  counts: {
    added: number;
    deleted: number;
    deliveries: number;
    finished: number;
    redelivered: number;
  };
};

/**
 * Checks a history:
 * - lost: every acknowledged add ends finished (delivered at least once), unless deleted;
 * - early: no delivery before the job's due time (the add's, for the first one);
 * - after-end: no delivery after its finish or delete was acknowledged;
 * - overlap: no delivery while another reservation of the job was still held (its lease not
 *   over, not finished, not released);
 * - stale-receipt: no finish accepted with a receipt after a newer reservation was made.
 */
export function checkHistory(
  events: readonly HistoryEvent[],
  /**
   * Each job's state at the end, read from the service after the run. A consumer killed right
   * after a finish was acknowledged never logs it, so whether a job was finished is read here
   * when given, and from the log otherwise.
   */
  finalStates?: ReadonlyMap<string, string>,
): CheckResult {
  const violations: Violation[] = [];
  const flag = (rule: string, id: string, detail: string) => violations.push({ rule, id, detail });
  const byId = new Map<string, HistoryEvent[]>();
  for (const event of events) byId.set(event.id, [...(byId.get(event.id) ?? []), event]);

  let added = 0;
  let deleted = 0;
  let deliveries = 0;
  let finished = 0;
  let redelivered = 0;
  for (const [id, list] of byId) {
    const of = <T extends HistoryEvent["type"]>(type: T) =>
      list.filter((e): e is Extract<HistoryEvent, { type: T }> => e.type === type);
    const adds = of("add");
    const deletes = of("delete");
    const delivered = of("deliver").sort((a, b) => a.reservedAt - b.reservedAt);
    const finishes = of("finish");
    const releases = of("release-sent");
    const finishSent = of("finish-sent");
    if (adds.length > 0) added += 1;
    if (deletes.length > 0) deleted += 1;
    if (finishes.length > 0) finished += 1;
    deliveries += delivered.length;
    if (delivered.length > 1) redelivered += 1;

    const firstAdd = adds.reduce<number | undefined>(
      (min, a) => Math.min(min ?? a.dueAt, a.dueAt),
      undefined,
    );
    if (adds.length > 0 && deletes.length === 0) {
      const done = finalStates ? finalStates.get(id) === "finished" : finishes.length > 0;
      if (!done && delivered.length === 0) flag("lost", id, "acknowledged add, never delivered");
      else if (!done) flag("lost", id, "delivered but never finished");
    }
    const first = delivered[0];
    if (first && firstAdd !== undefined && first.reservedAt < firstAdd) {
      flag("early", id, `first delivered at ${first.reservedAt}, due at ${firstAdd}`);
    }
    for (const d of delivered) {
      if (d.reservedAt < d.dueAt) flag("early", id, `delivered at ${d.reservedAt}, due ${d.dueAt}`);
    }
    const ends = [...finishes.map((f) => f.ackAt), ...deletes.map((d) => d.ackAt)];
    const endedAt = ends.length > 0 ? Math.min(...ends) : undefined;
    for (const d of delivered) {
      if (endedAt !== undefined && d.reservedAt > endedAt) {
        flag(
          "after-end",
          id,
          `delivered at ${d.reservedAt} after finish/delete acked at ${endedAt}`,
        );
      }
    }
    for (let i = 1; i < delivered.length; i++) {
      const previous = delivered[i - 1] as (typeof delivered)[number];
      const next = delivered[i] as (typeof delivered)[number];
      // The earliest the previous holder can have let go: a release or finish sent, or its lease end.
      const letGo = [
        previous.until,
        ...releases.filter((r) => r.receipt === previous.receipt).map((r) => r.sentAt),
        ...finishSent.filter((r) => r.receipt === previous.receipt).map((r) => r.sentAt),
      ];
      if (next.reservedAt < Math.min(...letGo)) {
        flag(
          "overlap",
          id,
          `${next.receipt} at ${next.reservedAt} while ${previous.receipt} held it`,
        );
      }
      if (next.receipt === previous.receipt) flag("overlap", id, `receipt ${next.receipt} reused`);
    }
    for (const f of finishes) {
      const own = delivered.find((d) => d.receipt === f.receipt);
      const newer = delivered.find(
        (d) =>
          d.receipt !== f.receipt &&
          own &&
          d.reservedAt > own.reservedAt &&
          d.reservedAt < f.sentAt,
      );
      if (newer) {
        flag(
          "stale-receipt",
          id,
          `finish with ${f.receipt} accepted after ${newer.receipt} was handed out`,
        );
      }
    }
  }
  return { violations, counts: { added, deleted, deliveries, finished, redelivered } };
}

/** Parses JSON-lines logs, skipping a torn last line (a process killed mid-write). */
export function parseLog(text: string): HistoryEvent[] {
  const events: HistoryEvent[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      events.push(JSON.parse(line) as HistoryEvent);
    } catch {
      // a line cut short by SIGKILL: the event it was logging is lost, as if never seen
    }
  }
  return events;
}

// ---------------------------------------------------------------------------------------------
// Push topics: what the producer saw and what the receiver got

/** How the fault run's receiver answered a delivery. */
export type ReceiverAnswer = "ok" | "slow" | "error" | "hang" | "reset";

/** One delivery as the receiver got it: the job, its attempt (one per lease), its due time. */
export type PushDelivery = {
  type: "push-deliver";
  id: string;
  /** The delivery's `attempt`: the reservation it was sent under (each claim counts one). */
  attempt: number;
  /** The delivery's `dueAt`, the job's due time for that reservation. */
  dueAt: number;
  /** When the request had arrived (its body read). */
  at: number;
  answer: ReceiverAnswer;
  /** When the exchange ended: the answer written, or the connection closed. */
  endedAt?: number;
  /** When the dispatcher sent it (its POST started), when known. */
  sentAt?: number;
};

export type PushEvent =
  /** A push job's add the API acknowledged; `dueAt` from the add, `ttr` its lease in ms. */
  | { type: "push-add"; id: string; dueAt: number; ackAt: number; ttr: number }
  /** A delete the API acknowledged. */
  | { type: "delete"; id: string; sentAt: number; ackAt: number }
  | PushDelivery;

/** A push job's record at the end of the run. */
export type PushFinal = {
  state: string;
  attempts: number;
  lastDelivery?: { status: number; at: number; error?: string };
};

export type PushCheckResult = {
  violations: Violation[];
  counts: {
    added: number;
    deleted: number;
    deliveries: number;
    finished: number;
    dead: number;
    /** Jobs delivered under more than one reservation. */
    redelivered: number;
    /** Jobs whose receiver said 2xx under one reservation and got them again under another. */
    duplicates: number;
    /**
     * Deliveries that arrived after their job's delete was acknowledged, the delete having come
     * after their due time: the delivery was under way (looked at, then sent) when the delete
     * ran. Allowed; counted.
     */
    inFlightAtDelete: number;
    /** Deliveries by the receiver's answer. */
    answers: Record<ReceiverAnswer, number>;
  };
};

const isOk = (d: PushDelivery) => d.answer === "ok" || d.answer === "slow";

/**
 * Checks a push topic's history against delayq's guarantees (DESIGN §3):
 * - lost: every acknowledged add that was not deleted ends finished (delivered, answered 2xx),
 *   or dead and visible;
 * - early: no delivery before its due time, nor the first before the add's due time;
 * - after-delete: no delivery after the job's delete was acknowledged, not even of a
 *   reservation made before it (a direct delivery claimed ahead of its due time); a delivery
 *   already under way when the delete ran (due before the delete was acknowledged, so looked
 *   at and sent, or about to be) is the one exception, counted as inFlightAtDelete;
 * - phantom: no delivery under a reservation the job's record does not count (attempt above
 *   the record's attempts);
 * - doubled: no reservation delivered twice (at-least-once means once per reservation), but for
 *   one immediate retry after the receiver dropped the connection of its first delivery;
 * - overlap: no reservation delivered before the one before it let go (its answer ended, or its
 *   lease, at least its due time + ttr, ran out);
 * - stale-settlement: a job ends finished only when the receiver said 2xx under its last
 *   reservation, and its last delivery records a 2xx: a settlement of an ended reservation
 *   (a late 2xx, a 500 after the lease ran out) never changes the job.
 * Deliveries of jobs whose add was not acknowledged are not judged.
 */
export function checkPushHistory(
  events: readonly PushEvent[],
  finals: ReadonlyMap<string, PushFinal>,
): PushCheckResult {
  const violations: Violation[] = [];
  const flag = (rule: string, id: string, detail: string) => violations.push({ rule, id, detail });
  const byId = new Map<string, PushEvent[]>();
  for (const event of events) byId.set(event.id, [...(byId.get(event.id) ?? []), event]);
  const counts: PushCheckResult["counts"] = {
    added: 0,
    deleted: 0,
    deliveries: 0,
    finished: 0,
    dead: 0,
    redelivered: 0,
    duplicates: 0,
    inFlightAtDelete: 0,
    answers: { ok: 0, slow: 0, error: 0, hang: 0, reset: 0 },
  };
  for (const [id, list] of byId) {
    const adds = list.filter((e) => e.type === "push-add");
    const add = adds[0];
    if (!add) continue;
    const deletes = list.filter((e) => e.type === "delete");
    const delivered = list
      .filter((e): e is PushDelivery => e.type === "push-deliver")
      .sort((a, b) => a.attempt - b.attempt || a.at - b.at);
    const final = finals.get(id);
    counts.added += 1;
    if (deletes.length > 0) counts.deleted += 1;
    counts.deliveries += delivered.length;
    for (const d of delivered) counts.answers[d.answer] += 1;
    if (final?.state === "finished") counts.finished += 1;
    if (final?.state === "dead") counts.dead += 1;
    const attempts = new Set(delivered.map((d) => d.attempt));
    if (attempts.size > 1) counts.redelivered += 1;
    const firstOk = delivered.find(isOk);
    if (firstOk && delivered.some((d) => d.attempt > firstOk.attempt)) counts.duplicates += 1;

    // lost
    if (deletes.length === 0) {
      if (!final || !["finished", "dead"].includes(final.state)) {
        flag("lost", id, `acknowledged add ends ${final?.state ?? "missing"}`);
      }
    } else if (final && !["finished", "dead", "deleted"].includes(final.state)) {
      flag("lost", id, `deleted (maybe) but ends ${final.state}`);
    }
    // early
    for (const d of delivered) {
      if (d.at < d.dueAt) flag("early", id, `attempt ${d.attempt} at ${d.at}, due ${d.dueAt}`);
      if (d.at < add.dueAt)
        flag("early", id, `attempt ${d.attempt} at ${d.at}, added due ${add.dueAt}`);
    }
    // after-delete
    const ackedDeletes = deletes.map((d) => d.ackAt);
    const deletedAt = ackedDeletes.length > 0 ? Math.min(...ackedDeletes) : undefined;
    if (deletedAt !== undefined) {
      for (const d of delivered) {
        if (d.at <= deletedAt) continue;
        if (deletedAt >= d.dueAt) {
          counts.inFlightAtDelete += 1;
          continue;
        }
        const sent = d.sentAt === undefined ? "" : `, sent at ${d.sentAt}`;
        flag(
          "after-delete",
          id,
          `attempt ${d.attempt} due ${d.dueAt}${sent}, arrived ${d.at}; delete acknowledged at ${deletedAt}`,
        );
      }
    }
    // phantom
    if (final) {
      for (const d of delivered) {
        if (d.attempt > final.attempts) {
          flag("phantom", id, `attempt ${d.attempt}, the record counts ${final.attempts}`);
        }
      }
    }
    // doubled
    for (let i = 1; i < delivered.length; i++) {
      const previous = delivered[i - 1] as PushDelivery;
      const next = delivered[i] as PushDelivery;
      if (next.attempt !== previous.attempt) continue;
      const retried = i >= 2 && (delivered[i - 2] as PushDelivery).attempt === next.attempt;
      if (previous.answer !== "reset" || retried) {
        flag("doubled", id, `attempt ${next.attempt} delivered at ${previous.at} and ${next.at}`);
      }
    }
    // overlap: the next reservation's delivery waits for the previous one to let go (its last
    // delivery: the retry, when there was one)
    for (const next of delivered) {
      const previous = delivered.filter((d) => d.attempt === next.attempt - 1).at(-1);
      if (!previous) continue;
      const letGo = Math.min(
        previous.endedAt ?? Number.POSITIVE_INFINITY,
        previous.dueAt + add.ttr,
      );
      if (next.at < letGo) {
        flag(
          "overlap",
          id,
          `attempt ${next.attempt} at ${next.at} while attempt ${previous.attempt} held it until ${letGo}`,
        );
      }
    }
    // stale-settlement
    if (final?.state === "finished") {
      const last = delivered.filter((d) => d.attempt === final.attempts);
      if (!last.some(isOk)) {
        flag(
          "stale-settlement",
          id,
          `finished at attempt ${final.attempts}, answered ${last.map((d) => d.answer).join(", ") || "nothing"} then`,
        );
      }
      const status = final.lastDelivery?.status ?? 0;
      if (status < 200 || status >= 300) {
        flag("stale-settlement", id, `finished with last delivery status ${status}`);
      }
    }
  }
  return { violations, counts };
}
