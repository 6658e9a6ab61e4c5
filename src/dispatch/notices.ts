// Failure notices: a dead push job's record sent to its topic's failureUrl, retried each minute
// until sent, for up to three days (NOTICE_RETRY_MS), or dropped when DQ_PRIVATE_PUSH refuses
// that URL. Each round shares its room between the topics with notices waiting (scripts/push.ts:
// notices).
import type { PushConfig } from "../domain/push";
import { splitRecord } from "../redis/record";
import { NOTICE_RETRY_MS, renoticeArgs, type Unsent } from "../redis/replies";
import type { Run } from "../run/run";
import { sendNotice } from "./delivery";
import type { DispatchDeps } from "./deps";

/**
 * Sends up to `limit` queued failure notices, as many as the run's budget pays for (the take, a
 * POST each, and the giving back of those not sent); answers how many went out, and whether the
 * round was full (took as many as it asked for). Its budget is taken at once, before the first
 * await.
 */
export async function sendNotices(
  run: Run,
  deps: DispatchDeps,
  limit: number,
): Promise<{ sent: number; full: boolean }> {
  const { budget, clock, log } = run;
  const { scripts } = deps;
  const most = Math.min(limit, budget.left() - 2);
  if (most <= 0 || !budget.take(most + 2)) return { sent: 0, full: false };
  const taken = await scripts.run("notices", clock(), [most, NOTICE_RETRY_MS]);
  const failedAt = clock();
  const unsent: Unsent = new Map();
  let sent = 0;
  let posted = 0;
  await Promise.all(
    taken.map(async (notice) => {
      if (notice.expired) {
        log({
          level: "warn",
          event: "notice_expired",
          id: notice.id,
          message:
            "failureUrl could not be told for 3 days: the notice is dropped (the job stays dead)",
        });
        return;
      }
      if (!notice.record) return;
      const { meta, body } = splitRecord(notice.record);
      const push = (JSON.parse(notice.config || "{}") as { push?: PushConfig }).push;
      if (!push?.failureUrl || meta.state !== "dead") return;
      const route = deps.route(meta.topic, push.failureUrl);
      if (route.refused) {
        // Sending it again would be refused again: dropped, and said once.
        log({
          level: "warn",
          event: "notice_refused",
          id: meta.id,
          topic: meta.topic,
          message: `failureUrl refused: ${route.refused}`,
        });
        return;
      }
      posted += 1;
      const ok = await sendNotice(push.failureUrl, push, meta, body, {
        fetch: route.fetch,
        now: clock,
        mayRetry: () => budget.take(1),
      });
      if (ok) sent += 1;
      else {
        const entry = `${notice.firstFailedAt ?? failedAt}|${notice.id}`;
        const topic = unsent.get(notice.topic);
        if (topic) topic.push(entry);
        else unsent.set(notice.topic, [entry]);
      }
    }),
  );
  budget.giveBack(most - posted);
  if (unsent.size > 0) await scripts.run("renotice", clock(), renoticeArgs(unsent));
  else budget.giveBack(1);
  // A round that took all it asked for may have left others waiting: the caller goes on.
  return { sent, full: taken.length >= most };
}
