// The checker itself: each rule catches the violation it is for, and a clean history passes.
import { describe, expect, it } from "vitest";
import { checkHistory, type HistoryEvent, parseLog } from "./support/history";

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
