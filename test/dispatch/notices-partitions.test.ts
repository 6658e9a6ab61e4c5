// Failure notices when topics are spread over partitions (the node-cluster project: 16, as a
// deployment on a Redis Cluster has): a round shares its room between the partitions with notices
// waiting, as the notices script shares a partition's between its topics, so a topic whose jobs
// die by the dozen holds back no other partition's topic, whichever partition a round starts at.
// In one keyspace (the node project) the same holds by the script alone.
import { afterEach, describe, expect, it } from "vitest";
import { partitions } from "../../src/redis/partitions";
import { createScriptRunner } from "../../src/redis/runner";
import { type PushApp, type Receiver, startReceiver, testPushApp } from "../support/push";
import { TEST_PARTITIONS } from "../support/redis";

let receivers: Receiver[] = [];
afterEach(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  receivers = [];
});

/** Two topic names, calm's partition the one after mass's (a topic's partition is its name's). */
function neighbours(): { mass: string; calm: string } {
  const layout = partitions("any", TEST_PARTITIONS);
  const mass = "mass";
  const next = (layout.ofTopic(mass) + 1) % layout.count;
  for (let i = 0; ; i++) {
    const calm = `calm-${i}`;
    if (layout.ofTopic(calm) === next) return { mass, calm };
  }
}

/** Kills `ids` of `topic` (added, claimed, buried by their answers): each queues a notice. */
async function kill(app: PushApp, topic: string, ids: string[]) {
  const runner = createScriptRunner(
    app.redis,
    app.keys.base.slice(1, -2),
    3_600_000,
    TEST_PARTITIONS,
  );
  await app.queue.addBatch(ids.map((id) => ({ topic, id })));
  const now = Date.now();
  const claimed = await runner.run("claim", now, [now, ids.length, 1, `k${now}`, topic, 0]);
  expect(claimed[0]?.records).toHaveLength(ids.length);
  for (const id of ids) {
    const { receipt } = await app.queue.get(id);
    const bury = { settlement: { outcome: "bury" as const }, status: 200 };
    const { work } = await app.dispatcher.settle(app.newRun(), {
      id,
      receipt: receipt as string,
      attempt: bury,
    });
    expect(work).toEqual([{ kind: "notices" }]);
  }
}

describe("failure notices over partitions", () => {
  it("send another partition's topic's notice in every round while one topic has dozens waiting", async () => {
    const { mass, calm } = neighbours();
    const busy = await startReceiver();
    const quiet = await startReceiver();
    const deliveries = await startReceiver();
    receivers.push(busy, quiet, deliveries);
    const app = testPushApp();
    for (const [topic, receiver] of [
      [mass, busy],
      [calm, quiet],
    ] as const) {
      const put = await app.call("PUT", `/v1/topics/${topic}`, {
        body: { push: { url: `${deliveries.url}/hook`, failureUrl: receiver.url } },
      });
      expect(put.status).toBe(200);
    }
    // More of mass's notices than two rounds of 16 take; then one of calm's before each round.
    await kill(
      app,
      mass,
      Array.from({ length: 34 }, (_, n) => `m${n}`),
    );
    for (const n of [1, 2]) {
      await kill(app, calm, [`c${n}`]);
      expect(await app.notices(16)).toBe(16);
      expect(quiet.received.map((r) => JSON.parse(r.body).id)).toEqual(
        Array.from({ length: n }, (_, i) => `c${i + 1}`),
      );
      expect(busy.received).toHaveLength(15 * n);
    }
  });
});
