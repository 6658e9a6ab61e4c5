// Claimed jobs of `via: "qstash"` topics published to QStash, each at its due second, and the
// message ids recorded on their records so that a delete cancels them.
import type { Run } from "../run/run";
import type { Parcel } from "./delivery";
import type { DispatchDeps, DrainReport } from "./deps";

/**
 * Publishes the parcels (their cost was taken at the claim) and records their message ids. A job
 * that ended while it was published has its message cancelled, when the budget pays for it.
 */
export async function publishParcels(
  run: Run,
  deps: DispatchDeps,
  parcels: Parcel[],
  report: DrainReport,
): Promise<void> {
  if (!deps.qstash) throw new Error("QStash is not configured");
  const { client, publicUrl } = deps.qstash;
  const ids = await client.publish(parcels, publicUrl, run.clock());
  report.published += ids.length;
  const triples = parcels.flatMap((parcel, i) => [
    parcel.meta.id,
    parcel.meta.receipt ?? "",
    ids[i] ?? "",
  ]);
  const stale = await deps.scripts.run("published", run.clock(), triples);
  for (const messageId of stale) {
    // Rare (the job ended while it was published): a cancel the budget cannot pay for is not
    // made; the message's delivery is then answered to a reservation that is over (ignored).
    if (run.budget.take(1)) await client.cancel(messageId);
    else
      run.log({
        level: "warn",
        event: "qstash_cancel_skipped",
        message: "subrequest budget spent",
      });
  }
}
