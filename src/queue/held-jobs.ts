// The verbs on a job a consumer holds (finish, touch, release, bury), run by their scripts.
import { parseInput } from "../domain/errors";
import { type Job, JobId } from "../domain/schemas";
import { bury, finish, type HeldReply, release, touch } from "../redis/lua/scripts/held";
import { decodeRecord } from "../redis/record";
import { type HeldVerb, scriptError } from "./errors";
import type { Shared } from "./options";

/** Runs a verb on a job the caller must hold; answers the job after the change. */
export async function runHeld(
  shared: Shared,
  verb: HeldVerb,
  id: string,
  args: (string | number)[],
): Promise<Job> {
  parseInput(JobId, id, "job id");
  const now = shared.clock();
  const script = { finish, touch, release, bury }[verb];
  const reply: HeldReply = await shared.scripts.run(script, now, [id, ...args]);
  if (reply.code !== "ok") throw scriptError(reply.code, { id, state: reply.value, verb });
  return verb === "finish"
    ? (undefined as never)
    : decodeRecord(reply.value, now, shared.rawBodies);
}
