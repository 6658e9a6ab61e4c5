// A consumer process for the fault suite: pops and finishes jobs over HTTP, logging what it sees.
// Usage: consumer.ts <apiUrl> <token> <topic> <log file> <name>
import { openSync, writeSync } from "node:fs";
import { createClient } from "../../../src/client";
import type { HistoryEvent } from "./history";

const [baseUrl, token, topic, logPath, name] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
];
const client = createClient({ baseUrl, token, retries: 8, retryDelayMs: 50 });
const fd = openSync(logPath, "a");
// Written synchronously, so an event is on disk before the step after it can happen.
const log = (event: HistoryEvent) => writeSync(fd, `${JSON.stringify(event)}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function handle(job: Awaited<ReturnType<typeof client.pop>>[number]) {
  const receipt = job.receipt as string;
  const roll = Math.random();
  if (roll < 0.05) return; // dropped, as by a consumer that forgot it: the lease brings it back
  if (roll < 0.12) {
    log({ type: "release-sent", id: job.id, receipt, sentAt: Date.now() });
    await client.release(job.id, { receipt, delay: 0.2 }).catch(() => undefined);
    return;
  }
  await sleep(Math.random() * 30);
  const sentAt = Date.now();
  log({ type: "finish-sent", id: job.id, receipt, sentAt });
  try {
    await client.finish(job.id, { receipt });
    log({ type: "finish", id: job.id, receipt, sentAt, ackAt: Date.now() });
  } catch {
    // refused (stale, or the job was deleted) or unreachable: the checker judges from the log
  }
}

for (;;) {
  let jobs: Awaited<ReturnType<typeof client.pop>> = [];
  try {
    jobs = await client.pop(topic, { count: 5, wait: 2 });
  } catch {
    await sleep(100);
    continue;
  }
  for (const job of jobs) {
    const until = job.reservedUntil as number;
    log({
      type: "deliver",
      id: job.id,
      receipt: job.receipt as string,
      reservedAt: until - job.ttr * 1000,
      until,
      dueAt: job.dueAt,
      consumer: name,
    });
  }
  await Promise.all(jobs.map(handle));
}
