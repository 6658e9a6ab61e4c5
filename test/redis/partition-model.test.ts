// The two-step writes of a partitioned deployment (docs/cluster.md): an add claims its id in the
// id's partition (idClaim), then writes the job in its topic's. Random sequences of adds,
// deletes, finishes and reads over ids and topics of different partitions, with the service
// dying between the two steps of some adds (the client refuses every call after the claim),
// against a model of which job each id is: an id is never two jobs at once, a read always
// finds the job an acknowledged add made, and a crashed add never blocks the id for good.
import type { Redis } from "@upstash/redis";
import { describe, expect, it } from "vitest";
import { DelayQueue, DelayqError, tick } from "../../src/index";
import { SCRIPTS, type ScriptName } from "../../src/redis/lua/scripts";
import { CLAIM_WINDOW_MS } from "../../src/redis/lua/scripts/partitions";
import { partitions } from "../../src/redis/partitions";
import { routeOf } from "../../src/redis/routing";
import { createScriptRunner } from "../../src/redis/runner";
import { createSchedules } from "../../src/schedules/schedules";
import { testRedis } from "../support/redis";

const PARTS = 4;

/** A client whose script calls fail, before anything is sent, while `dead` is set. */
function dying(redis: Redis): { redis: Redis; die(after: string): void; revive(): void } {
  let dead = false;
  let killAfter: string | undefined;
  const client = Object.create(redis) as Redis;
  Object.defineProperty(client, "createScript", {
    value: (text: string) => {
      const script = redis.createScript(text);
      const name = /--\[\[ (\w+):/.exec(text)?.[1] ?? "";
      return {
        exec: async (keys: string[], args: string[]) => {
          if (dead) throw new Error("fetch failed: the process died");
          const reply = await script.exec(keys, args);
          if (killAfter === name) dead = true;
          return reply;
        },
      };
    },
  });
  return {
    redis: client,
    die: (after) => {
      killAfter = after;
    },
    revive: () => {
      dead = false;
      killAfter = undefined;
    },
  };
}

/** A seeded generator (mulberry32): the same sequence on every run for a seed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("the two-step add of a partitioned deployment", () => {
  it.each([1, 2, 3])(
    "agrees with the model over 150 random steps with crashes (seed %i)",
    async (seed) => {
      const test = testRedis({ automaticDeserialization: false });
      const prefix = test.prefix.slice(0, -1);
      const fault = dying(test.redis);
      // The scripts' clock: a claim older than CLAIM_WINDOW_MS (by it) may be taken over.
      let now = Date.now();
      const queue = new DelayQueue({
        redis: fault.redis,
        prefix,
        partitions: PARTS,
        clock: () => now,
      });
      const layout = partitions(prefix, PARTS);
      // Topics of every partition, ids whose own partition is sometimes their topic's.
      const topics: string[] = [];
      for (let i = 0; topics.length < 4; i++) {
        const topic = `m${i}`;
        if (!topics.some((t) => layout.ofTopic(t) === layout.ofTopic(topic))) topics.push(topic);
      }
      const ids = Array.from({ length: 8 }, (_, i) => `id-${i}`);
      /** The model: each id's job, by topic and whether it still waits. */
      const model = new Map<string, { topic: string; state: "waiting" | "finished" | "deleted" }>();
      const next = random(seed);
      const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)] as T;
      let crashes = 0;
      let takenOver = 0;
      /** Adds that died between their two steps, by id: the topic and when. */
      const crashed = new Map<string, { topic: string; at: number }>();
      for (let step = 0; step < 150; step++) {
        now += next() < 0.1 ? CLAIM_WINDOW_MS + 1000 : Math.floor(next() * 2000);
        const id = pick(ids);
        const topic = pick(topics);
        const roll = next();
        const known = model.get(id);
        if (roll < 0.45) {
          const crash = next() < 0.3;
          if (crash) fault.die("idClaim");
          // A claim of another partition's topic left by a crash, young: the add waits for it.
          const left = crashed.get(id);
          const inFlight =
            known === undefined &&
            left !== undefined &&
            layout.ofTopic(left.topic) !== layout.ofTopic(topic) &&
            now - left.at <= CLAIM_WINDOW_MS;
          try {
            const added = await queue.add({ topic, id, body: step });
            expect(crash).toBe(false);
            expect(inFlight).toBe(false);
            if (known === undefined) {
              expect(added.created).toBe(true);
              model.set(id, { topic, state: "waiting" });
              if (left !== undefined) takenOver += 1;
              crashed.delete(id);
            } else {
              expect(known.topic).toBe(topic);
              expect(added.created).toBe(false);
            }
          } catch (error) {
            expect(error).toBeInstanceOf(DelayqError);
            const code = (error as DelayqError).code;
            if (crash) {
              expect(code).toBe("redis_unavailable");
              crashes += 1;
              if (known === undefined && !crashed.has(id)) crashed.set(id, { topic, at: now });
            } else if (inFlight) {
              expect(code).toBe("redis_unavailable");
              expect((error as DelayqError).message).toMatch(
                /in flight, or stopped less than 30 s ago/,
              );
            } else {
              // Another topic's job holds the id.
              expect(code).toBe("job_exists");
              expect(known?.topic).not.toBe(topic);
            }
          } finally {
            fault.revive();
          }
        } else if (roll < 0.6 && known?.state === "waiting") {
          await queue.delete(id);
          model.set(id, { ...known, state: "deleted" });
        } else if (roll < 0.75 && known?.state === "waiting") {
          const popped = await queue.pop(known.topic, { count: 100 });
          for (const job of popped) {
            await queue.finish(job.id, { receipt: job.receipt });
            const entry = model.get(job.id);
            expect(entry?.topic).toBe(known.topic);
            model.set(job.id, { topic: known.topic, state: "finished" });
          }
        } else {
          const read = await queue.get(id).catch((error: DelayqError) => error);
          if (known === undefined) {
            expect(read).toBeInstanceOf(DelayqError);
            expect((read as DelayqError).code).toBe("job_not_found");
          } else {
            expect(read).toMatchObject({ id, topic: known.topic });
            const state = (read as { state: string }).state;
            expect(known.state === "waiting" ? ["ready", "waiting"] : [known.state]).toContain(
              state === "delayed" ? "waiting" : state,
            );
          }
        }
      }
      expect(crashes).toBeGreaterThan(5);
      expect(takenOver).toBeGreaterThan(0);
      // Every id the model holds reads as that job; each id lives in one topic's partition only.
      for (const [id, job] of model) {
        expect(await queue.get(id)).toMatchObject({ id, topic: job.topic });
      }
    },
    60_000,
  );

  it("lets exactly one of two adds of an id to topics of two partitions win, whatever their order", async () => {
    const test = testRedis({ automaticDeserialization: false });
    const prefix = test.prefix.slice(0, -1);
    const layout = partitions(prefix, PARTS);
    const queue = new DelayQueue({ redis: test.redis, prefix, partitions: PARTS });
    const a = "race-a";
    let b = "race-b";
    for (let i = 0; layout.ofTopic(b) === layout.ofTopic(a); i++) b = `race-b${i}`;
    for (let n = 0; n < 20; n++) {
      const id = `race-${n}`;
      const results = await Promise.allSettled([
        queue.add({ topic: a, id, body: 1 }),
        queue.add({ topic: b, id, body: 2 }),
      ]);
      const won = results.filter((r) => r.status === "fulfilled");
      expect(won).toHaveLength(1);
      const lost = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
      expect((lost.reason as DelayqError).code).toBe("job_exists");
      const winner = results[0]?.status === "fulfilled" ? a : b;
      expect((await queue.get(id)).topic).toBe(winner);
      // The loser's topic holds nothing of it.
      const loser = winner === a ? b : a;
      expect((await queue.pop(loser, { count: 100 })).map((job) => job.id)).not.toContain(id);
    }
  });
});

describe("the router", () => {
  it("routes every script on a partitioned deployment (a new script must say where it runs)", () => {
    const unrouted = (Object.keys(SCRIPTS) as ScriptName[]).filter((name) => !routeOf(name));
    expect(unrouted).toEqual([]);
    // Its own bookkeeping is never called by name from outside.
    expect(routeOf("idClaim")).toBe("bookkeeping");
    expect(routeOf("watchPolled")).toBe("home");
  });
});

describe("the outbox", () => {
  it("adds the fires a service that died after its schedule's save left for another partition, at the next tick", async () => {
    const test = testRedis({ automaticDeserialization: false });
    const prefix = test.prefix.slice(0, -1);
    const layout = partitions(prefix, PARTS);
    let now = Date.now();
    // The service that dies: its schedule is saved (fires in home's outbox), their add never runs.
    const fault = dying(test.redis);
    const schedules = createSchedules({
      scripts: createScriptRunner(fault.redis, prefix, 3_600_000, PARTS),
      defaults: { ttrMs: 60_000, maxAttempts: 10 },
    });
    let topic = "fires";
    for (let i = 0; layout.ofTopic(topic) === 0; i++) topic = `fires-${i}`;
    fault.die("scheduleSave");
    await expect(
      schedules.put("every-second", { cron: "* * * * * *", topic }, undefined, now),
    ).rejects.toThrow();
    fault.revive();
    // Another instance: nothing of the fires in the topic until its tick applies the outbox.
    const queue = new DelayQueue({
      redis: test.redis,
      prefix,
      partitions: PARTS,
      clock: () => now,
    });
    now += 3000;
    expect(await queue.pop(topic, { count: 100 })).toEqual([]);
    await tick(queue);
    const fired = await queue.pop(topic, { count: 100 });
    expect(fired.length).toBeGreaterThanOrEqual(3);
    for (const job of fired) expect(job.id).toMatch(/^every-second@\d+$/);
    // Applied once: a second tick adds nothing again.
    await tick(queue);
    expect(await queue.pop(topic, { count: 100 })).toEqual([]);
  });
});
