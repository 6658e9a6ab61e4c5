// The verbs on a job a consumer holds (finish, touch, release, bury), run by their scripts.
import { DelayqError, parseInput } from "../domain/errors";
import type { FinishItemResult } from "../domain/results";
import { FinishItem, type Job, JobId, MAX_POP } from "../domain/schemas";
import { decodeRecord } from "../redis/record";
import type { HeldReply } from "../redis/replies";
import { type HeldVerb, scriptError } from "./errors";
import type { Shared } from "./options";

/** Runs touch, release or bury on a job the caller must hold; answers the job after the change. */
export async function runHeld(
  shared: Shared,
  verb: Exclude<HeldVerb, "finish">,
  id: string,
  args: (string | number)[],
): Promise<Job> {
  parseInput(JobId, id, "job id");
  const timed = await shared.scripts.runTimed(verb, shared.scriptNow(), [id, ...args]);
  const reply: HeldReply = timed.reply;
  if (reply.code !== "ok") throw scriptError(reply.code, { id, state: reply.value, verb });
  return decodeRecord(reply.value, timed.now, shared.rawBodies);
}

/** Finishes one job the caller must hold (`receipt` "" for whoever holds it). */
export async function finishOne(
  shared: Shared,
  scope: string,
  id: string,
  receipt: string,
): Promise<void> {
  parseInput(JobId, id, "job id");
  const [reply] = await shared.scripts.run("finish", shared.clock(), [scope, id, receipt]);
  if (reply && reply.code !== "ok") {
    throw scriptError(reply.code, { id, state: reply.value, verb: "finish" });
  }
}

/**
 * Finishes up to MAX_POP jobs in one script call. Each item is validated and decided on its own:
 * one result per item, in order, `{finished: true}` or `{error}`. No jobs (a pop that found
 * none) is nothing to do: no call, no results.
 */
export async function finishMany(
  shared: Shared,
  scope: string,
  inputs: readonly unknown[],
): Promise<FinishItemResult[]> {
  const list = finishList(scope, inputs);
  if (list.args.length === 1) return list.results;
  return list.decided(await shared.scripts.run("finish", shared.clock(), list.args));
}

/** Jobs to finish, checked: a script's arguments and how to read its answers (finish, pop). */
export type FinishList = {
  /** The scope, then each valid item's id and receipt ("" for none). */
  args: string[];
  /** One result per item, the invalid ones already decided. */
  results: FinishItemResult[];
  /** The results, given the script's replies for the valid items in order. */
  decided(replies: readonly HeldReply[]): FinishItemResult[];
};

/**
 * Checks the jobs to finish (at most MAX_POP, else invalid_request), each item on its own: an
 * invalid one is answered `{error}` and left out of the script's arguments. `field` names the
 * list in messages.
 */
export function finishList(scope: string, inputs: readonly unknown[], field = "jobs"): FinishList {
  if (!Array.isArray(inputs) || inputs.length > MAX_POP) {
    throw new DelayqError("invalid_request", `${field}: give at most ${MAX_POP} jobs to finish`);
  }
  const results: FinishItemResult[] = new Array(inputs.length);
  const args: string[] = [scope];
  const positions: number[] = [];
  inputs.forEach((input, i) => {
    try {
      const { id, receipt } = parseInput(FinishItem, input, `${field}.${i}`);
      args.push(id, receipt ?? "");
      positions.push(i);
    } catch (error) {
      if (!(error instanceof DelayqError)) throw error;
      results[i] = { error: { code: error.code, message: error.message } };
    }
  });
  const decided = (replies: readonly HeldReply[]) => {
    positions.forEach((position, j) => {
      const reply = replies[j];
      const id = args[1 + 2 * j] as string;
      if (!reply) throw new Error("The script answered fewer finished jobs than it was given");
      if (reply.code === "ok") {
        results[position] = { finished: true };
      } else {
        const error = scriptError(reply.code, { id, state: reply.value, verb: "finish" });
        results[position] = { error: { code: error.code, message: error.message } };
      }
    });
    return results;
  };
  return { args, results, decided };
}
