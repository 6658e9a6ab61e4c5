// rsmq as a benchmark peer: sendMessage to add, polling loops that receive and delete to consume.
import RedisSMQ from "rsmq";
import type { JobBody, SystemAdapter } from "../lib/types";

const QUEUE = "bench";
/** rsmq-worker's default `invisibletime`, also rsmq's default queue `vt`. */
const VISIBILITY_S = 30;
/** rsmq has no bulk add: this many sendMessage calls in flight on the producer connection. */
const SEND_CONCURRENCY = 100;

/** Sends QUIT and resolves once the connection has answered (rsmq declares no quitAsync). */
const quit = (client: RedisSMQ) =>
  new Promise<void>((resolve, reject) =>
    client.quit((error) => (error ? reject(error) : resolve())),
  );

const ADD_NOTE =
  "No bulk add: sendMessage, up to 100 in flight on one connection. Delays go in as " +
  "fractional seconds; rsmq parses them with parseInt, so a job can run up to 1 s early.";

/**
 * rsmq with polling loops shaped like rsmq-worker's: after each receive the loop waits
 * `pollWaitS[waitCount]` seconds (the last entry once past the end), where waitCount restarts at
 * 0 after a message and grows by one with every receive.
 */
export function rsmqAdapter(name: string, pollWaitS: readonly number[], pollNote: string) {
  const adapter: SystemAdapter = {
    name,
    notes: [ADD_NOTE, pollNote],
    async open({ redisPort, log }) {
      const producer = new RedisSMQ({ host: "127.0.0.1", port: redisPort, ns: "rsmq" });
      await producer.createQueueAsync({ qname: QUEUE });
      return {
        async add(jobs) {
          for (let i = 0; i < jobs.length; i += SEND_CONCURRENCY) {
            await Promise.all(
              jobs.slice(i, i + SEND_CONCURRENCY).map((job) =>
                producer.sendMessageAsync({
                  qname: QUEUE,
                  message: JSON.stringify(job.body),
                  delay: job.dueAt === undefined ? 0 : Math.max(0, job.dueAt - Date.now()) / 1000,
                }),
              ),
            );
          }
        },
        async consume({ concurrency, handle }) {
          const client = new RedisSMQ({ host: "127.0.0.1", port: redisPort, ns: "rsmq" });
          let stopped = false;
          let failure: unknown;
          const deletes = new Set<Promise<void>>();
          const sleepers = new Set<() => void>();
          const pause = (ms: number) =>
            new Promise<void>((resolve) => {
              const wake = () => {
                clearTimeout(timer);
                sleepers.delete(wake);
                resolve();
              };
              const timer = setTimeout(wake, ms);
              sleepers.add(wake);
            });
          const loop = async () => {
            let waitCount = 0;
            while (!stopped) {
              const message = await client.receiveMessageAsync({ qname: QUEUE, vt: VISIBILITY_S });
              if ("id" in message) {
                await handle(JSON.parse(message.message) as JobBody);
                const deleting = client
                  .deleteMessageAsync({ qname: QUEUE, id: message.id })
                  .then(
                    () => undefined,
                    (error: unknown) => {
                      failure ??= error;
                    },
                  )
                  .finally(() => deletes.delete(deleting));
                deletes.add(deleting);
                waitCount = 0;
              }
              const wait = pollWaitS[Math.min(waitCount, pollWaitS.length - 1)] ?? 0;
              waitCount++;
              if (wait > 0 && !stopped) await pause(wait * 1000);
            }
          };
          const loops = Array.from({ length: concurrency }, () =>
            loop().catch((error: unknown) => {
              failure ??= error;
              log(`polling loop failed: ${error instanceof Error ? error.message : String(error)}`);
            }),
          );
          return {
            async stop() {
              stopped = true;
              for (const wake of sleepers) wake();
              await Promise.all(loops);
              await Promise.all(deletes);
              await quit(client);
              if (failure !== undefined) throw failure;
            },
          };
        },
        close: () => quit(producer),
      };
    },
  };
  return adapter;
}

/** rsmq-worker's defaults: `interval` [0, 1, 5, 10] s, so an idle loop polls every 10 s. */
export const rsmq = rsmqAdapter(
  "rsmq",
  [0, 1, 5, 10],
  "Consumers poll the way rsmq-worker does by default: receiveMessage (vt 30 s), handle, " +
    "deleteMessage without waiting for it, receive again at once; after empty receives wait " +
    "1, 5, then 10 s. One loop per unit of concurrency, all sharing one client.",
);

/** Not in the default run: polls every 100 ms, so lateness shows rsmq's 1 s delay granularity. */
export const rsmqFastPoll = rsmqAdapter(
  "rsmq-poll-100ms",
  [0, 0.1],
  "Like rsmq, but the loops wait 100 ms after an empty receive (rsmq-worker `interval: 0.1`), " +
    "so lateness shows rsmq's own delay granularity rather than rsmq-worker's back-off.",
);
