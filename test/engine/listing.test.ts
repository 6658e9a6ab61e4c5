// Paging through a topic's jobs while the topic changes: a job that stays in its state from the
// first page to the last is listed; cursors belong to the state they came from.
import { describe, expect, it } from "vitest";
import { tick } from "../../src/index";
import { expectError } from "../support/expect";
import { SLOT_OPENS, slotOf, testQueue } from "../support/queue";

async function listAll(
  t: ReturnType<typeof testQueue>,
  state: "delayed" | "ready" | "reserved" | "dead",
  limit: number,
  between?: (page: number) => Promise<void>,
): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  let page = 0;
  do {
    const got = await t.queue.list("q", { state, cursor, limit });
    ids.push(...got.jobs.map((job) => job.id));
    cursor = got.cursor;
    if (between) await between(page++);
  } while (cursor !== undefined);
  return ids;
}

describe("list", () => {
  it("refuses a slot cursor for another state than delayed (issue 8.7)", async () => {
    const t = testQueue();
    await t.queue.add({ topic: "q", id: "far", delay: 7200 });
    for (const state of ["ready", "reserved", "dead"] as const) {
      await expectError(t.queue.list("q", { state, cursor: "s0:0" }), "invalid_request", /delayed/);
    }
    expect((await t.queue.list("q", { state: "ready" })).jobs).toEqual([]);
  });

  it("lists every slotted job although their slot opens between two pages (issue 8.8)", async () => {
    const t = testQueue();
    const a = slotOf(t.clock.now) + 6 * 60_000;
    const b = a + 60_000;
    await t.queue.addBatch([
      ...Array.from({ length: 6 }, (_, n) => ({ topic: "q", id: `a${n}`, runAt: a + n })),
      ...Array.from({ length: 3 }, (_, n) => ({ topic: "q", id: `b${n}`, runAt: b + n })),
    ]);
    const ids = await listAll(t, "delayed", 3, async (page) => {
      if (page === 0) {
        // Slot a opens; b stays far.
        t.clock.set(a - SLOT_OPENS);
        await tick(t.queue);
      }
    });
    const expected = [...Array.from({ length: 6 }, (_, n) => `a${n}`), "b0", "b1", "b2"];
    expect(new Set(ids)).toEqual(new Set(expected));
  });

  it("goes on to the slots after a cursor's slot that has nothing past the cursor", async () => {
    // A slot's list can be shorter than the cursor into it, as when its slot opened and a caller
    // whose clock is behind filled it again; here the cursor is past the end outright.
    const t = testQueue();
    const first = slotOf(t.clock.now) + 6 * 60_000;
    await t.queue.addBatch(
      [0, 1, 2].map((n) => ({ topic: "q", id: `s${n}`, runAt: first + n * 60_000 })),
    );
    const ids: string[] = [];
    let cursor: string | undefined = `s${first}:5`;
    for (let pages = 0; cursor !== undefined && pages < 5; pages++) {
      const got = await t.queue.list("q", { state: "delayed", cursor, limit: 1 });
      ids.push(...got.jobs.map((job) => job.id));
      cursor = got.cursor;
    }
    expect(ids).toEqual(["s1", "s2"]);
    expect(cursor).toBeUndefined();
  });

  it("skips nothing when earlier entries leave the index between pages", async () => {
    const t = testQueue();
    await t.queue.addBatch(
      Array.from({ length: 6 }, (_, n) => ({
        topic: "q",
        id: `r${n}`,
        runAt: t.clock.now - 100 + n,
      })),
    );
    const ids = await listAll(t, "ready", 2, async (page) => {
      // After the first page the two jobs listed are taken: a page offset would now skip two.
      if (page === 0) await t.queue.pop("q", { count: 2 });
    });
    expect(ids).toEqual(["r0", "r1", "r2", "r3", "r4", "r5"]);
  });
});
