// BullMQ as a benchmark peer: Queue.addBulk to add, one Worker with concurrency to consume.
import { Queue, Worker } from "bullmq";
import type { JobBody, SystemAdapter } from "../lib/types";

const QUEUE = "bench";

export const bullmq: SystemAdapter = {
  name: "bullmq",
  notes: [
    "Queue.addBulk per batch, delayed jobs with the `delay` option; one Worker with concurrency.",
    "All options at their defaults: completed jobs are kept (removeOnComplete unset), events " +
      "stream on, drainDelay 5 s, stalledInterval 30 s, lockDuration 30 s.",
  ],
  async open({ redisPort, log }) {
    const connection = { host: "127.0.0.1", port: redisPort };
    const queue = new Queue<JobBody>(QUEUE, { connection });
    queue.on("error", (error) => log(`queue error: ${error.message}`));
    await queue.waitUntilReady();
    return {
      async add(jobs) {
        const now = Date.now();
        await queue.addBulk(
          jobs.map((job) => ({
            name: "job",
            data: job.body,
            opts: job.dueAt === undefined ? {} : { delay: Math.max(0, job.dueAt - now) },
          })),
        );
      },
      async consume({ concurrency, handle }) {
        const worker = new Worker<JobBody>(
          QUEUE,
          async (job) => {
            await handle(job.data);
          },
          { connection, concurrency },
        );
        worker.on("error", (error) => log(`worker error: ${error.message}`));
        await worker.waitUntilReady();
        return { stop: () => worker.close() };
      },
      close: () => queue.close(),
    };
  },
};
