// Failure notices: a dead push job's record sent to its topic's failureUrl, retried until sent.
import type { PushConfig } from "../domain/push";
import { notices, renotice } from "../redis/lua/scripts/push";
import { splitRecord } from "../redis/record";
import type { ScriptRunner } from "../redis/runner";
import { type Post, sendNotice } from "./delivery";

/** Sends up to `limit` queued failure notices; answers how many went out. */
export async function sendNotices(
  scripts: ScriptRunner,
  clock: () => number,
  fetch: Post | undefined,
  limit: number,
): Promise<number> {
  const taken = await scripts.run(notices, clock(), [limit]);
  const unsent: string[] = [];
  let sent = 0;
  await Promise.all(
    taken.map(async (notice) => {
      if (!notice.record) return;
      const { meta, body } = splitRecord(notice.record);
      const push = (JSON.parse(notice.config || "{}") as { push?: PushConfig }).push;
      if (!push?.failureUrl || meta.state !== "dead") return;
      const ok = await sendNotice(push.failureUrl, push, meta, body, { fetch, now: clock });
      if (ok) sent += 1;
      else unsent.push(notice.id);
    }),
  );
  if (unsent.length > 0) await scripts.run(renotice, clock(), unsent);
  return sent;
}
