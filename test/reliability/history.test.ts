// The checkers themselves: each rule catches the violation it is for, and a clean history passes.
import { describe, expect, it } from "vitest";
import {
  checkHistory,
  checkPushHistory,
  type HistoryEvent,
  type PushDelivery,
  type PushEvent,
  type PushFinal,
  parseLog,
} from "./support/history";

const add = (id: string, dueAt = 100): HistoryEvent => ({ type: "add", id, dueAt, ackAt: 90 });
const deliver = (id: string, receipt: string, reservedAt: number, until = reservedAt + 1000) =>
  ({ type: "deliver", id, receipt, reservedAt, until, dueAt: 100, consumer: "c1" }) as HistoryEvent;
const finish = (id: string, receipt: string, sentAt: number): HistoryEvent => ({
  type: "finish",
  id,
  receipt,
  sentAt,
  ackAt: sentAt + 5,
});
const rules = (events: HistoryEvent[]) => checkHistory(events).violations.map((v) => v.rule);

describe("checkHistory", () => {
  it("passes a clean history, redelivery after a lease included", () => {
    const result = checkHistory([
      add("a"),
      deliver("a", "r1", 100, 1100),
      deliver("a", "r2", 1100, 2100),
      finish("a", "r2", 1200),
      add("b"),
      { type: "delete", id: "b", sentAt: 95, ackAt: 99 },
    ]);
    expect(result.violations).toEqual([]);
    expect(result.counts).toEqual({
      added: 2,
      deleted: 1,
      deliveries: 2,
      finished: 1,
      redelivered: 1,
    });
  });

  it("catches a lost job and an unfinished one", () => {
    expect(rules([add("a")])).toEqual(["lost"]);
    expect(rules([add("a"), deliver("a", "r1", 100)])).toEqual(["lost"]);
  });

  it("reads whether a job finished from the final states when given", () => {
    // The consumer was killed after its finish was acknowledged, before it could log it.
    const unlogged = [add("a"), deliver("a", "r1", 100)];
    expect(checkHistory(unlogged, new Map([["a", "finished"]])).violations).toEqual([]);
    expect(checkHistory(unlogged, new Map([["a", "ready"]])).violations).toHaveLength(1);
  });

  it("catches an early delivery", () => {
    expect(rules([add("a", 500), deliver("a", "r1", 499), finish("a", "r1", 600)])).toContain(
      "early",
    );
  });

  it("catches a delivery after the finish was acknowledged", () => {
    expect(
      rules([add("a"), deliver("a", "r1", 100), finish("a", "r1", 200), deliver("a", "r2", 300)]),
    ).toContain("after-end");
  });

  it("catches two holders at once, unless the first let go", () => {
    const both = [
      add("a"),
      deliver("a", "r1", 100, 1100),
      deliver("a", "r2", 500),
      finish("a", "r2", 600),
    ];
    expect(rules(both)).toContain("overlap");
    const released: HistoryEvent = { type: "release-sent", id: "a", receipt: "r1", sentAt: 400 };
    expect(rules([...both, released])).toEqual([]);
  });

  it("catches a stale receipt that was accepted", () => {
    expect(
      rules([
        add("a"),
        deliver("a", "r1", 100, 1100),
        deliver("a", "r2", 1100, 2100),
        finish("a", "r1", 1500),
      ]),
    ).toContain("stale-receipt");
  });

  it("skips a line torn by a kill", () => {
    const log = `${JSON.stringify(add("a"))}\n{"type":"deliver","id":"a","rec`;
    expect(parseLog(log)).toEqual([add("a")]);
  });
});

describe("checkPushHistory", () => {
  const pushAdd = (id: string, dueAt = 1000, ttr = 1000): PushEvent => ({
    type: "push-add",
    id,
    dueAt,
    ackAt: 900,
    ttr,
  });
  const got = (
    id: string,
    attempt: number,
    at: number,
    answer: PushDelivery["answer"] = "ok",
    dueAt = 1000,
    endedAt = at + 5,
  ): PushDelivery => ({ type: "push-deliver", id, attempt, dueAt, at, answer, endedAt });
  const finished = (attempts: number, status = 200): PushFinal => ({
    state: "finished",
    attempts,
    lastDelivery: { status, at: 0 },
  });
  const rules = (events: PushEvent[], finals: Record<string, PushFinal>) =>
    checkPushHistory(events, new Map(Object.entries(finals))).violations.map((v) => v.rule);

  it("passes a clean history: a 500, then a redelivery answered 2xx; a deleted job", () => {
    const result = checkPushHistory(
      [
        pushAdd("a"),
        got("a", 1, 1000, "error"),
        got("a", 2, 1300, "ok", 1200),
        pushAdd("b"),
        { type: "delete", id: "b", sentAt: 950, ackAt: 960 },
      ],
      new Map<string, PushFinal>([
        ["a", finished(2)],
        ["b", { state: "deleted", attempts: 0 }],
      ]),
    );
    expect(result.violations).toEqual([]);
    expect(result.counts).toMatchObject({
      added: 2,
      deleted: 1,
      deliveries: 2,
      finished: 1,
      redelivered: 1,
      duplicates: 0,
    });
  });

  it("notes a duplicate across reservations (a 2xx, then the lease ran out) without flagging it", () => {
    const result = checkPushHistory(
      [pushAdd("a"), got("a", 1, 1000, "slow", 1000, 2500), got("a", 2, 2300, "ok", 2200)],
      new Map([["a", finished(2)]]),
    );
    expect(result.violations).toEqual([]);
    expect(result.counts.duplicates).toBe(1);
  });

  it("catches a lost job: never finished, or never delivered", () => {
    expect(rules([pushAdd("a")], { a: { state: "delayed", attempts: 0 } })).toEqual(["lost"]);
    expect(
      rules([pushAdd("a"), got("a", 1, 1000, "error")], { a: { state: "ready", attempts: 1 } }),
    ).toEqual(["lost"]);
    expect(rules([pushAdd("a")], {})).toEqual(["lost"]);
    // Dead and visible is not lost.
    expect(
      rules([pushAdd("a"), got("a", 1, 1000, "error")], { a: { state: "dead", attempts: 1 } }),
    ).toEqual([]);
  });

  it("catches an early delivery, against its own due time and the add's", () => {
    expect(rules([pushAdd("a"), got("a", 1, 999)], { a: finished(1) })).toContain("early");
    expect(
      rules([pushAdd("a", 2000), got("a", 1, 1500, "ok", 1000)], { a: finished(1) }),
    ).toContain("early");
  });

  it("catches a delivery after an acknowledged delete, whenever its reservation was made", () => {
    const deleted = { type: "delete" as const, id: "a", sentAt: 900, ackAt: 950 };
    // Reserved before the delete (attempt 1, counted by the record), delivered after it.
    expect(
      rules([pushAdd("a"), deleted, got("a", 1, 1000)], { a: { state: "deleted", attempts: 1 } }),
    ).toEqual(["after-delete"]);
    // Due (under way) before the delete was acknowledged: in flight, counted, allowed.
    const inFlight = checkPushHistory(
      [pushAdd("a", 900), deleted, got("a", 1, 1000, "ok", 900)],
      new Map([["a", { state: "deleted", attempts: 1 }]]),
    );
    expect(inFlight.violations).toEqual([]);
    expect(inFlight.counts.inFlightAtDelete).toBe(1);
    // Delivered before the delete was acknowledged: fine.
    expect(
      rules([pushAdd("a", 900), deleted, got("a", 1, 940, "ok", 900)], {
        a: { state: "deleted", attempts: 1 },
      }),
    ).toEqual([]);
  });

  it("catches a reservation delivered twice, and one the record does not count", () => {
    expect(
      rules([pushAdd("a"), got("a", 1, 1000), got("a", 1, 1100)], { a: finished(1) }),
    ).toContain("doubled");
    expect(rules([pushAdd("a"), got("a", 2, 1000)], { a: finished(1) })).toContain("phantom");
  });

  it("allows one immediate retry of a delivery whose connection was dropped, and no more", () => {
    const dropped = got("a", 1, 1000, "reset", 1000, 1000);
    expect(rules([pushAdd("a"), dropped, got("a", 1, 1001)], { a: finished(1) })).toEqual([]);
    expect(
      rules([pushAdd("a"), dropped, got("a", 1, 1001, "reset", 1000, 1001), got("a", 1, 1002)], {
        a: finished(1),
      }),
    ).toContain("doubled");
    // A retry holds the reservation as its first delivery did.
    const retryHung = got("a", 1, 1001, "hang", 1000, 3000);
    expect(
      rules([pushAdd("a"), dropped, retryHung, got("a", 2, 1500, "ok", 1400)], { a: finished(2) }),
    ).toContain("overlap");
  });

  it("catches a redelivery while the previous reservation was still held", () => {
    // Attempt 1 hung until 3000, its lease (ttr 1000) ran until at least 2000.
    const hung = got("a", 1, 1000, "hang", 1000, 3000);
    expect(
      rules([pushAdd("a"), hung, got("a", 2, 1500, "ok", 1400)], { a: finished(2) }),
    ).toContain("overlap");
    expect(rules([pushAdd("a"), hung, got("a", 2, 2100, "ok", 2050)], { a: finished(2) })).toEqual(
      [],
    );
  });

  it("catches a job finished by a stale settlement", () => {
    // The last reservation was answered 500: only the earlier (ended) one said 2xx.
    expect(
      rules(
        [pushAdd("a"), got("a", 1, 1000, "slow", 1000, 2500), got("a", 2, 2300, "error", 2200)],
        { a: finished(2) },
      ),
    ).toContain("stale-settlement");
    expect(rules([pushAdd("a"), got("a", 1, 1000)], { a: finished(1, 500) })).toContain(
      "stale-settlement",
    );
  });
});
