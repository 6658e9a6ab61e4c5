// Reschedule and promote while several ticks and consumers of two queue objects run at once, over
// the real REST path: no job is handed out before its latest due time, none twice, none lost.
import { describe, expect, it } from "vitest";
import { DelayQueue, DelayqError, tick } from "../../src/index";
import { testRedis } from "../support/redis";

/** Simulated time runs this many times faster than the wall clock, so that slot lists open. */
const SPEED = 50;
const MINUTE = 60_000;

describe("reschedule under concurrency", () => {
  it("hands every job out once, never before the due time its last move gave it", async () => {
    const total = 300;
    const prefix = `resc${crypto.randomUUID().slice(0, 8)}`;
    const epoch = Date.now();
    const base = 1_800_000_000_000;
    // One simulated clock shared by every queue object: 1 ms of wall time is SPEED ms of it.
    const clock = () => base + (Date.now() - epoch) * SPEED;
    // Each gets its own client, as separate Worker invocations and servers would.
    const queue = () => new DelayQueue({ redis: testRedis().redis, prefix, clock });
    const producer = queue();
    let seed = 42;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    /** Each job's due time as its last successful add, reschedule or promote answered it. */
    const due = new Map<string, number>();
    // Due from now to 15 minutes ahead: some in the delayed zset, most in slot lists.
    const jobs = Array.from({ length: total }, (_, i) => ({
      topic: "r",
      id: `job-${i}`,
      runAt: clock() + 1000 + Math.floor(random() * 15 * MINUTE),
      ttr: 3600,
    }));
    for (const job of jobs) due.set(job.id, job.runAt);
    await producer.addBatch(jobs);
    const handed = new Map<string, { at: number; dueAt: number }[]>();
    const refused = { reschedule: 0, promote: 0 };
    let moves = 0;
    let stop = false;

    const consume = async () => {
      const q = queue();
      while (!stop) {
        const jobs = await q.pop("r", { count: 10 });
        const at = clock();
        for (const job of jobs) {
          handed.set(job.id, [...(handed.get(job.id) ?? []), { at, dueAt: job.dueAt }]);
          await q.finish(job.id, { receipt: job.receipt });
        }
        if (jobs.length === 0) await new Promise((r) => setTimeout(r, 10));
      }
    };
    const schedule = async () => {
      const q = queue();
      while (!stop) {
        await tick(q);
        await new Promise((r) => setTimeout(r, 15));
      }
    };
    // Moves jobs about for the first 6 simulated minutes: later, earlier, into and out of slot
    // lists, due now, promoted. One move at a time per job, so "its last move" is well defined.
    const reschedule = async (worker: number) => {
      const q = queue();
      while (clock() < base + 6 * MINUTE) {
        const id = `job-${Math.floor(random() * total)}`;
        if (Number(id.slice(4)) % 2 !== worker) continue;
        try {
          const roll = random();
          const job =
            roll < 0.2
              ? await q.promote(id)
              : await q.reschedule(id, { runAt: clock() + Math.floor((roll - 0.3) * 12 * MINUTE) });
          due.set(id, job.dueAt);
          moves++;
        } catch (error) {
          if (!(error instanceof DelayqError) || error.code !== "invalid_state") throw error;
          refused[/promoted/.test(error.message) ? "promote" : "reschedule"]++;
        }
      }
    };

    const workers = [consume(), consume(), schedule(), schedule(), schedule()];
    await Promise.all([reschedule(0), reschedule(1)]);
    const deadline = Date.now() + 60_000;
    while (handed.size < total && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    stop = true;
    await Promise.all(workers);

    expect(moves).toBeGreaterThan(30);
    // Never lost, handed out exactly once.
    expect(handed.size).toBe(total);
    expect([...handed.values()].filter((list) => list.length !== 1)).toEqual([]);
    for (const [id, [pop]] of handed) {
      // Handed out with the due time of its last move, and not before it.
      expect({ id, dueAt: pop?.dueAt }).toEqual({ id, dueAt: due.get(id) });
      expect(pop?.at).toBeGreaterThanOrEqual(pop?.dueAt ?? Infinity);
    }
    const stats = await producer.topic("r");
    expect(stats.counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
  }, 120_000);
});
