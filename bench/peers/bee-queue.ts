// bee-queue as a benchmark peer: saveAll to add, one worker Queue with process(concurrency).
import BeeQueue from "bee-queue";
import type { JobBody, SystemAdapter } from "../lib/types";

const QUEUE = "bench";
/** bee-queue's default stallInterval; its README says to check about that often. */
const STALL_CHECK_MS = 5000;

export const beeQueue: SystemAdapter = {
  name: "bee-queue",
  notes: [
    "Producer: a Queue with isWorker and getEvents off (the README's advice for producers); " +
      "Queue#saveAll per batch, delayed jobs with Job#delayUntil.",
    "Worker: one Queue with activateDelayedJobs on (off by default; nothing delayed would ever " +
      "run without it) and process(concurrency); checkStalledJobs every 5 s as the README " +
      "tells users to call it. Everything else default (jobs kept after success, events sent).",
  ],
  async open({ redisPort, log }) {
    const redis = { host: "127.0.0.1", port: redisPort };
    const producer = new BeeQueue<JobBody>(QUEUE, { redis, isWorker: false, getEvents: false });
    producer.on("error", (error) => log(`producer error: ${error.message}`));
    await producer.ready();
    return {
      async add(jobs) {
        const created = jobs.map((job) => {
          const created = producer.createJob(job.body);
          if (job.dueAt !== undefined) created.delayUntil(job.dueAt);
          return created;
        });
        const [error] = (await producer.saveAll(created)).values();
        if (error) throw error;
      },
      async consume({ concurrency, handle }) {
        const worker = new BeeQueue<JobBody>(QUEUE, { redis, activateDelayedJobs: true });
        worker.on("error", (error) => log(`worker error: ${error.message}`));
        await worker.ready();
        await worker.checkStalledJobs(STALL_CHECK_MS);
        worker.process(concurrency, async (job) => {
          await handle(job.data);
        });
        return { stop: () => worker.close() };
      },
      close: () => producer.close(),
    };
  },
};
