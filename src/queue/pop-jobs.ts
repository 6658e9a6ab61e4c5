// Popping: one pop script call per try, with the long-poll wait between tries.
import type { Job } from "../domain/schemas";
import { pop } from "../redis/lua/scripts/pop";
import { randomHex } from "../redis/nonce";
import { decodeRecord } from "../redis/record";
import { scriptError } from "./errors";
import type { Shared } from "./options";

/**
 * Reserves up to `count` due jobs of a topic, waiting up to `wait` seconds for one (see
 * `DelayQueue.pop`). The caller checks the topic and the options first.
 */
export async function popJobs(
  shared: Shared,
  topic: string,
  count: number,
  wait: number,
  signal?: AbortSignal,
): Promise<Job[]> {
  const giveUpAt = Date.now() + wait * 1000;
  const { scripts, clock } = shared;
  for (;;) {
    const now = clock();
    // What is left of the wait: the script registers a caller that will wait (lib/topic.ts).
    const waitMs = wait === 0 ? 0 : Math.max(0, giveUpAt - Date.now());
    // Others waiting here are woken only when more jobs may be ready: the script says so.
    const others = shared.wakeups.waiting(topic) > 0 ? "1" : "";
    const reply = await scripts.run(pop, now, [topic, count, randomHex(6), waitMs, others]);
    if ("pushTopic" in reply) throw scriptError("pushTopic", { id: topic });
    shared.wakeups.popped(topic, "more" in reply && reply.more);
    if (reply.records.length > 0)
      return reply.records.map((raw) => decodeRecord(raw, now, shared.rawBodies));
    if (!("seq" in reply) || wait === 0) return [];
    const woke = await shared.wakeups.wait({
      redis: shared.redis,
      topic,
      metaKey: shared.keys.meta(topic),
      nextAt: reply.nextAt,
      seq: reply.seq,
      giveUpAt,
      pollIntervalMs: shared.pollIntervalMs,
      clock,
      signal,
    });
    if (!woke) return [];
  }
}
