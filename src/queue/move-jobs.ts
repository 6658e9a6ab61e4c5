// Changing a waiting job's due time for DelayQueue: reschedule and promote, one script each.
import { DelayqError, parseInput } from "../domain/errors";
import { type Job, JobId, MAX_DELAY_SECONDS } from "../domain/schemas";
import { decodeRecord } from "../redis/record";
import { type MoveVerb, scriptError } from "./errors";
import type { DelayQueueOptions, Shared } from "./options";

/**
 * Runs reschedule (to `runAt`, or `delay` seconds from now) or promote (due now) on a job;
 * answers the job after the change. A push topic's job is offered to `onPushed`, as an add's is,
 * so that one made due now is delivered without waiting for the next tick.
 */
export async function moveJob(
  shared: Shared,
  verb: MoveVerb,
  id: string,
  scope: string,
  input: { delay?: number; runAt?: number },
  onPushed: DelayQueueOptions["onPushed"],
): Promise<Job> {
  parseInput(JobId, id, "job id");
  const now = shared.clock();
  const args: (string | number)[] = [id, scope];
  const field = input.runAt === undefined ? "delay" : "runAt";
  if (verb === "reschedule") {
    const due = input.runAt ?? now + Math.round((input.delay ?? 0) * 1000);
    if (due > now + MAX_DELAY_SECONDS * 1000) {
      throw new DelayqError("invalid_request", `${field}: must be at most a year from now`);
    }
    // A delay is counted by the script from its own now (Redis's clock), not the caller's.
    args.push(input.runAt ?? `+${Math.round((input.delay ?? 0) * 1000)}`);
  }
  const timed = await shared.scripts.runTimed(verb, shared.scriptNow(), args);
  const reply = timed.reply;
  if (reply.code !== "ok") throw scriptError(reply.code, { id, state: reply.value, verb, field });
  const job = decodeRecord(reply.value, timed.now, shared.rawBodies);
  if (job.state === "ready") shared.wakeups.offer(job.topic);
  else shared.wakeups.dueAt(job.topic, job.dueAt);
  if (reply.via) onPushed?.([{ topic: job.topic, via: reply.via, dueAt: job.dueAt }]);
  return job;
}
