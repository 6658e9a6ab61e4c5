// Popping: one pop script call per try, with the long-poll wait between tries.
import type { Job } from "../domain/schemas";
import { decodeRecord } from "../redis/record";
import type { HeldReply } from "../redis/replies";
import { scriptError } from "./errors";
import type { Drained } from "./long-poll";
import type { Shared } from "./options";

/** What a pop reserved, and what became of the jobs it was given to finish first (in order). */
export type Popped = { jobs: Job[]; finished: HeldReply[] };

/**
 * Reserves up to `count` due jobs of a topic, waiting up to `wait` seconds for one (see
 * `DelayQueue.pop`). The caller checks the topic and the options first. `finish`: the finish
 * script's arguments (scope, then id and receipt of each job) for jobs the first try finishes
 * before it takes any.
 */
export async function popJobs(
  shared: Shared,
  topic: string,
  count: number,
  wait: number,
  signal?: Pick<AbortSignal, "aborted">,
  finish: readonly string[] = [],
): Promise<Popped> {
  const giveUpAt = Date.now() + wait * 1000;
  const { scripts, clock, wakeups } = shared;
  let finished: HeldReply[] = [];
  for (let first = true; ; first = false) {
    const now = clock();
    // What is left of the wait: the script registers a caller that will wait (lib/topic.ts).
    const waitMs = wait === 0 ? 0 : Math.max(0, giveUpAt - Date.now());
    // A caller that will wait, in a process whose last pop of the topic found its ready list
    // empty just now with nothing changed here since, reads the topic's change counter instead
    // of popping: unchanged, a pop would find nothing (in the herd, every consumer back from a
    // finish sent one). One command instead of a pop's three; none when a waiter here is
    // popping for the due time that has come (Wakeups.known). Jobs to finish need the script.
    const known =
      first && waitMs > 0 && finish.length === 0
        ? wakeups.known(topic, now, waitMs, shared.pollIntervalMs)
        : undefined;
    let drained: Drained | undefined;
    if (
      known &&
      (known.pending ||
        (await wakeups.confirm(
          shared.redis,
          topic,
          shared.scripts.topicKeys(topic).seq(topic),
          known.drained,
        )))
    ) {
      drained = known.drained;
    } else {
      // Others waiting here are woken only when more jobs may be ready: the script says so.
      const others = wakeups.waiting(topic) > 0 ? "1" : "";
      const snapshot = wakeups.snapshot(topic);
      const args = [topic, count, waitMs, others];
      const timed = await scripts.runTimed(
        "pop",
        shared.scriptNow(),
        first ? [...args, ...finish] : args,
      );
      const reply = timed.reply;
      if (first) finished = reply.finished;
      if ("pushTopic" in reply) throw scriptError("pushTopic", { id: topic });
      wakeups.popped(topic, "more" in reply && reply.more);
      if (reply.records.length > 0) {
        if ("drained" in reply && reply.drained) {
          wakeups.learn(topic, snapshot, reply.drained);
          wakeups.tell(topic, reply.drained.nextAt);
        }
        const jobs = reply.records.map((raw) => decodeRecord(raw, timed.now, shared.rawBodies));
        return { jobs, finished };
      }
      if (!("seq" in reply) || wait === 0) return { jobs: [], finished };
      drained = { nextAt: reply.nextAt, seq: reply.seq };
      wakeups.learn(topic, snapshot, drained, reply.registeredUntil);
    }
    const woke = await wakeups.wait({
      redis: shared.redis,
      topic,
      seqKey: shared.scripts.topicKeys(topic).seq(topic),
      nextAt: drained.nextAt,
      seq: drained.seq,
      giveUpAt,
      pollIntervalMs: shared.pollIntervalMs,
      clock,
      signal,
    });
    if (!woke) return { jobs: [], finished };
  }
}
