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
