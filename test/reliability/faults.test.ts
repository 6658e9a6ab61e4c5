// Load with faults — consumers SIGKILLed mid-reservation, three schedulers at once, redis-server
// killed and restarted (AOF, fsync always), a proxy dropping, delaying and 5xx-ing requests to
// Redis — then the history checker: nothing lost, early, doubled or accepted stale. Beside the
// pulled topic, a push topic delivers to a receiver in the test that answers 2xx most of the
// time and otherwise 500, late, never or by dropping the connection; the three schedulers run
// the push step too (deliveries claimed and sent from concurrent ticks and from the requests
// that add jobs due soon), and the push checker reads the receiver's log against the producer's.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { Redis } from "@upstash/redis";
import { afterAll, describe, expect, it } from "vitest";
import { type Bridge, startBridge } from "../../dev/bridge";
import { type FaultProxy, NO_FAULTS, startFaultProxy } from "../../dev/fault-proxy";
import { type RedisServer, startRedisServer } from "../../dev/redis-server";
import { NO_TCP_FAULTS, startTcpFaultProxy, type TcpFaultProxy } from "../../dev/tcp-fault-proxy";
import { createClient } from "../../src/client";
import { createDispatcher } from "../../src/dispatch/dispatcher";
import { createApp } from "../../src/http/app";
import { parseTokens } from "../../src/http/auth";
import { createScheduler, DelayQueue, drainStep, REDIS_CLIENT_OPTIONS } from "../../src/index";
import type { Logger } from "../../src/log";
import { NodeRestRedis } from "../../src/redis/rest-node";
import { createScriptRunner, type RedisClient } from "../../src/redis/runner";
import { connectRedis } from "../../src/redis/tcp";
import { createRun } from "../../src/run";
import { pushStep } from "../../src/scheduler/push";
import {
  checkHistory,
  checkPushHistory,
  type HistoryEvent,
  type PushEvent,
  type PushFinal,
  parseLog,
} from "./support/history";
import { type FaultyReceiver, startFaultyReceiver } from "./support/receiver";

const SECONDS = Number(process.env.DQ_RELIABILITY_SECONDS ?? 20);
/**
 * Enough traffic to mean something: acknowledged pull and push jobs, per transport. Over TCP a
 * drop stalls every caller on the connection (their retries back off together), so the same
 * 20 s carry less, and vary more: 1,120 to 2,560 pull jobs and 135 to 510 push jobs in six runs
 * on 2026-11-27; over fetch, on a slow CI machine, 660 and 175 (2026-11-28).
 */
const ENOUGH = {
  tcp: { pull: 300, push: 60 },
  http: { pull: 500, push: 200 },
};
const CONSUMERS = 4;
const TOPIC = "rel";
const PUSH_TOPIC = "rel-push";
const PUSH_SECRET = "reliability-push-secret-0123";
/** Seconds the receiver has to answer: past a lease of 1 s, within one of 3 s. */
const PUSH_TIMEOUT = 2;
const TOKEN = "reliability-token";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const cleanup: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
});

/**
 * How the service reaches Redis: over REST with @upstash/redis's own client (fetch, as on
 * Workers) or NodeRestRedis without auto-pipelining, a turn's commands in one /pipeline request
 * (undici, as functions/node.ts builds it), or
 * over TCP with the driver REDIS_URL selects (ioredis, scripts as Redis Functions).
 */
const TRANSPORTS = ["fetch", "undici", "tcp"] as const;

describe("faults", () => {
  it.each(TRANSPORTS)(
    "keeps every guarantee through kills, restarts and a lossy network (Redis through %s)",
    async (transport) => {
      const dir = mkdtempSync(join(tmpdir(), "delayq-reliability-"));
      cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
      const aof = { dir: join(dir, "redis"), appendOnly: true, appendFsync: "always" } as const;
      let redis: RedisServer = await startRedisServer(aof);
      cleanup.push(() => redis.stop());
      const bridge: Bridge = await startBridge({ redisPort: redis.port, tokens: "bridge" });
      cleanup.push(() => bridge.close());
      const proxy: FaultProxy = await startFaultProxy(bridge.url, {
        dropBefore: 0.02,
        dropAfter: 0.02,
        error5xx: 0.02,
        delay: 0.1,
        maxDelayMs: 100,
      });
      cleanup.push(() => proxy.close());
      // Over TCP, the same kinds of faults between the driver and redis-server (no 5xx there),
      // rarer: a dropped connection fails every command in flight on it, not one request.
      const tcpProxy: TcpFaultProxy = await startTcpFaultProxy(redis.port, {
        dropBefore: 0.004,
        dropAfter: 0.004,
        delay: 0.1,
        maxDelayMs: 100,
      });
      cleanup.push(() => tcpProxy.close());
      const faultStats = () =>
        transport === "tcp" ? { ...tcpProxy.stats, errors: 0 } : proxy.stats;

      // The push topic's receiver: 2xx mostly; 500, late, never, or a dropped connection.
      const receiver: FaultyReceiver = await startFaultyReceiver({
        secret: PUSH_SECRET,
        faults: { error: 0.1, slow: 0.05, hang: 0.04, reset: 0.05 },
        slowMs: [1200, 1800],
      });
      cleanup.push(() => receiver.close());

      // The service, as src/service.ts builds it, talking to Redis through the proxy: the queue,
      // push delivery (a dispatcher), and the app, whose requests deliver push jobs due soon.
      const redisClient = (): RedisClient => {
        if (transport === "tcp") {
          const tcp = connectRedis(`redis://127.0.0.1:${tcpProxy.port}`, {
            commandTimeoutMs: 5_000,
          });
          cleanup.push(() => tcp.ioredis.disconnect());
          return tcp;
        }
        const config = {
          url: proxy.url,
          token: "bridge",
          ...REDIS_CLIENT_OPTIONS,
          retry: { retries: 1, backoff: () => 20 },
        };
        return transport === "fetch"
          ? new Redis(config)
          : new NodeRestRedis({
              ...config,
              enableAutoPipelining: false,
              turnPipelining: true,
              timeoutMs: 5_000,
            });
      };
      const pushLogs: Record<string, unknown>[] = [];
      const pushLog: Logger = (entry) => pushLogs.push(entry);
      // When each delivery was sent (its POST started), by job and attempt, for the checker's
      // messages; the POST itself goes out unchanged.
      const sent = new Map<string, number[]>();
      const dispatcher = () =>
        createDispatcher({
          scripts: createScriptRunner(redisClient(), TOPIC, 3_600_000),
          log: pushLog,
          fetch: (url, init) => {
            const { id, attempt } = JSON.parse(String(init.body)) as {
              id: string;
              attempt: number;
            };
            sent.set(`${id}#${attempt}`, [...(sent.get(`${id}#${attempt}`) ?? []), Date.now()]);
            return fetch(url, init);
          },
        });
      const queue = (pollIntervalMs = 200) =>
        new DelayQueue({ redis: redisClient(), prefix: TOPIC, pollIntervalMs, rawBodies: true });
      // Deliveries run after the answers and ticks that start them; the run awaits them at the end.
      const inFlight = new Set<Promise<unknown>>();
      const track = (work: Promise<unknown>) => {
        const tracked = work.catch(() => undefined).finally(() => inFlight.delete(tracked));
        inFlight.add(tracked);
      };
      const app = createApp({
        queue: queue(),
        tokens: parseTokens(TOKEN),
        log: () => undefined,
        push: {
          dispatcher: dispatcher(),
          qstashReady: false,
          log: pushLog,
        },
        // Each request is a run whose background work (deliveries) the test awaits at the end.
        newRun: () =>
          createRun({ subrequests: 1000, lifetimeMs: 30_000, log: pushLog, waitUntil: track }),
      });
      const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
      await new Promise((r) => server.once("listening", r));
      cleanup.push(() => new Promise((r) => server.close(r)));
      const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const api = createClient({ baseUrl: apiUrl, token: TOKEN, retries: 10, retryDelayMs: 50 });
      // A short backoff and many attempts: failed deliveries come back soon, none dies.
      await api.configureTopic(PUSH_TOPIC, {
        backoff: 0.2,
        maxAttempts: 100,
        push: {
          url: `${receiver.url}/hook`,
          via: "direct",
          secret: PUSH_SECRET,
          timeout: PUSH_TIMEOUT,
        },
      });

      // Consumers: child processes, each logging to its own file, SIGKILLed now and then.
      const consumers = new Map<string, ChildProcess>();
      let kills = 0;
      const startConsumer = () => {
        const name = `consumer-${consumers.size + kills}-${Date.now() % 10_000}`;
        const child = spawn(
          process.execPath,
          [
            "--import",
            "tsx",
            join(import.meta.dirname, "support", "consumer.ts"),
            apiUrl,
            TOKEN,
            TOPIC,
            join(dir, `${name}.log`),
            name,
          ],
          { stdio: "ignore" },
        );
        consumers.set(name, child);
      };
      const stopConsumers = async () => {
        for (const child of consumers.values()) child.kill("SIGKILL");
        await sleep(100);
      };
      cleanup.push(stopConsumers);
      for (let i = 0; i < CONSUMERS; i++) startConsumer();

      const events: HistoryEvent[] = [];
      const pushEvents: PushEvent[] = [];
      let running = true;
      const acked = new Set<string>();
      const pushAcked = new Set<string>();
      const ackedBeforeRestart = new Set<string>();
      const deleted = new Set<string>();
      let apiRequests = 0;

      const produce = async () => {
        let n = 0;
        while (running) {
          const jobs = Array.from({ length: 20 }, () => ({
            topic: TOPIC,
            id: `job-${n++}`,
            body: { n },
            delay: Math.random() * 3,
            ttr: 2,
            maxAttempts: 100,
          }));
          try {
            apiRequests++;
            const results = await api.addBatch(jobs);
            results.forEach((result, i) => {
              if (!("job" in result)) return;
              acked.add(result.job.id);
              // The due time the add set: its server time plus the delay asked for. Not the
              // answer's dueAt: when the client retried an add whose first answer was lost, the
              // retry answers the stored job as it is now, which may already have been handed
              // out and released to a later due time.
              const delay = (jobs[i] as (typeof jobs)[number]).delay;
              events.push({
                type: "add",
                id: result.job.id,
                dueAt: result.job.createdAt + Math.round(delay * 1000),
                ackAt: Date.now(),
              });
            });
          } catch {
            // unacknowledged: the checker expects nothing of these jobs
          }
          await sleep(100);
        }
      };
      // Push jobs due within 2 s, leased 1 s (shorter than the push timeout: a late or missing
      // answer outlives its lease) or 3 s (longer).
      const producePush = async () => {
        let n = 0;
        while (running) {
          const jobs = Array.from({ length: 5 }, () => ({
            topic: PUSH_TOPIC,
            id: `push-${n++}`,
            body: { n },
            delay: Math.random() * 2,
            ttr: Math.random() < 0.5 ? 1 : 3,
          }));
          try {
            apiRequests++;
            const results = await api.addBatch(jobs);
            results.forEach((result, i) => {
              if (!("job" in result)) return;
              const job = jobs[i] as (typeof jobs)[number];
              pushAcked.add(result.job.id);
              pushEvents.push({
                type: "push-add",
                id: result.job.id,
                dueAt: result.job.createdAt + Math.round(job.delay * 1000),
                ackAt: Date.now(),
                ttr: job.ttr * 1000,
              });
            });
          } catch {
            // unacknowledged: the checker expects nothing of these jobs
          }
          await sleep(100);
        }
      };
      const deleteSome = async () => {
        while (running) {
          await sleep(150);
          // Push jobs: among the latest, mostly claimed for delivery and not yet due.
          const push = Math.random() < 0.5;
          const candidates = (push ? [...pushAcked].slice(-30) : [...acked]).filter(
            (id) => !deleted.has(id),
          );
          const id = candidates[Math.floor(Math.random() * candidates.length)];
          if (!id) continue;
          const sentAt = Date.now();
          try {
            apiRequests++;
            await api.delete(id);
            deleted.add(id);
            (push ? pushEvents : events).push({ type: "delete", id, sentAt, ackAt: Date.now() });
          } catch {
            // not acknowledged: it may or may not be deleted; the checker does not count on it
          }
        }
      };
      // Three schedulers as the service has them (drain, then push), ticking concurrently; the
      // push step hands its deliveries over (as to a Worker's waitUntil) and returns.
      let ticking = true;
      let ticks = 0;
      const schedulers = Array.from({ length: 3 }, async () => {
        const scheduler = createScheduler({
          steps: [drainStep(queue()), pushStep(dispatcher())],
          log: pushLog,
        });
        while (ticking) {
          ticks++;
          const run = createRun({
            subrequests: 100_000,
            lifetimeMs: 125_000,
            log: pushLog,
            waitUntil: track,
          });
          await scheduler.tick(run).catch(() => undefined);
          await sleep(50);
        }
      });
      const killer = async () => {
        while (running) {
          await sleep(1500);
          const names = [...consumers.keys()];
          const victim = names[Math.floor(Math.random() * names.length)];
          if (!victim || !running) continue;
          consumers.get(victim)?.kill("SIGKILL");
          consumers.delete(victim);
          kills += 1;
          startConsumer();
        }
      };
      let restarts = 0;
      const restarter = async () => {
        await sleep((SECONDS * 1000) / 2);
        for (const id of [...acked, ...pushAcked]) ackedBeforeRestart.add(id);
        redis.process.kill("SIGKILL");
        await new Promise((r) => redis.process.once("exit", r));
        await sleep(300);
        redis = await startRedisServer({ ...aof, port: redis.port });
        restarts += 1;
      };

      const started = Date.now();
      const load = [produce(), producePush(), deleteSome(), killer(), restarter()];
      await sleep(SECONDS * 1000);
      // A slow machine carries less traffic in the same time: the load goes on, up to SECONDS
      // more, until it has carried enough (the floors are asserted below all the same).
      const enough = ENOUGH[transport === "tcp" ? "tcp" : "http"];
      const loadUntil = Date.now() + SECONDS * 1000;
      while (
        (acked.size <= enough.pull || pushAcked.size <= enough.push) &&
        Date.now() < loadUntil
      ) {
        await sleep(250);
      }
      const loadSeconds = (Date.now() - started) / 1000;
      running = false;
      await Promise.all(load);

      // Faults off (Redis and the receiver); the consumers and the schedulers drain what is left.
      Object.assign(proxy.faults, NO_FAULTS);
      Object.assign(tcpProxy.faults, NO_TCP_FAULTS);
      Object.assign(receiver.faults, { error: 0, slow: 0, hang: 0, reset: 0 });
      const drainUntil = Date.now() + 60_000;
      const busy = (c: { delayed: number; ready: number; reserved: number }) =>
        c.delayed + c.ready + c.reserved > 0;
      let counts = (await api.topic(TOPIC)).counts;
      let pushCounts = (await api.topic(PUSH_TOPIC)).counts;
      while ((busy(counts) || busy(pushCounts) || inFlight.size > 0) && Date.now() < drainUntil) {
        await sleep(250);
        counts = (await api.topic(TOPIC)).counts;
        pushCounts = (await api.topic(PUSH_TOPIC)).counts;
      }
      ticking = false;
      await Promise.all(schedulers);
      await Promise.all(inFlight);
      await stopConsumers();

      const logs = readdirSync(dir)
        .filter((name) => name.endsWith(".log"))
        .flatMap((name) => parseLog(readFileSync(join(dir, name), "utf8")));
      // Each pulled job's end state, read back (a consumer killed after its finish never logs it).
      const states = new Map<string, string>();
      for (const id of acked) states.set(id, (await api.get(id)).state);
      const { violations, counts: figures } = checkHistory([...events, ...logs], states);
      const wrongEnd = [...acked].filter(
        (id) => states.get(id) !== (deleted.has(id) ? "deleted" : "finished"),
      );

      // The push topic: every acknowledged job's record, read back, against the receiver's log.
      const pushFinals = new Map<string, PushFinal>();
      for (const id of pushAcked) {
        const job = await api.get(id);
        pushFinals.set(id, {
          state: job.state,
          attempts: job.attempts,
          ...(job.lastDelivery ? { lastDelivery: job.lastDelivery } : {}),
        });
        states.set(id, job.state);
      }
      for (const delivery of receiver.deliveries) {
        delivery.sentAt = sent.get(`${delivery.id}#${delivery.attempt}`)?.shift();
      }
      const push = checkPushHistory([...pushEvents, ...receiver.deliveries], pushFinals);
      const pushStats = await api.topic(PUSH_TOPIC);
      // Every add acknowledged before the restart survived it (a push job may end dead, visible).
      const lostInRestart = [...ackedBeforeRestart].filter((id) => {
        const ends = pushAcked.has(id) ? ["finished", "deleted", "dead"] : ["finished", "deleted"];
        return !ends.includes(states.get(id) ?? "missing");
      });
      const answers = push.counts.answers;
      const logged = (event: string) => pushLogs.filter((e) => e.event === event).length;

      console.log(
        `reliability over ${transport} (${((Date.now() - started) / 1000).toFixed(1)} s, ` +
          `${loadSeconds.toFixed(1)} s of load): ` +
          `pull: ${figures.added} jobs, ${figures.deliveries} deliveries ` +
          `(${figures.redelivered} redelivered), ${figures.finished} finished, ` +
          `${figures.deleted} deleted; push: ${push.counts.added} jobs, ` +
          `${push.counts.deliveries} deliveries (${answers.ok} 2xx, ${answers.slow} late 2xx, ` +
          `${answers.error} 500, ${answers.hang} no answer, ${answers.reset} dropped; ` +
          `${push.counts.redelivered} redelivered, ${push.counts.duplicates} duplicates across ` +
          `leases, ${push.counts.inFlightAtDelete} under way when their delete came), ` +
          `${push.counts.finished} finished, ${push.counts.dead} dead, ` +
          `${push.counts.deleted} deleted, ${receiver.badSignatures} bad signatures, ` +
          `${logged("push_settle_failed")} settlements lost to Redis faults, ` +
          `${logged("push_failed")} claims or deliveries failed; ` +
          `${apiRequests} producer and deleter requests, ${ticks} ticks; faults: ${kills} consumers killed, ` +
          `${restarts} redis restarts, proxy: ${faultStats().droppedBefore} dropped before, ` +
          `${faultStats().droppedAfter} dropped after, ${faultStats().errors} 5xx, ` +
          `${faultStats().delayed} delayed, ${faultStats().passed} passed; violations: ` +
          `${violations.length} pull, ${push.violations.length} push`,
      );
      for (const v of [...violations, ...push.violations].slice(0, 10)) {
        console.log(`violation: ${v.rule} ${v.id}: ${v.detail}`);
      }
      expect(violations.slice(0, 10)).toEqual([]);
      expect(push.violations.slice(0, 10)).toEqual([]);
      expect(wrongEnd.slice(0, 10)).toEqual([]);
      expect(lostInRestart).toEqual([]);
      expect(counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
      expect(pushCounts).toMatchObject({ delayed: 0, ready: 0, reserved: 0 });
      expect(receiver.badSignatures).toBe(0);
      // Every delivery the topic counts reached the receiver (a failed one may not have).
      expect(pushStats.push?.delivered ?? 0).toBeLessThanOrEqual(push.counts.deliveries);
      expect(figures.added).toBeGreaterThan(enough.pull);
      expect(push.counts.added).toBeGreaterThan(enough.push);
      expect(kills).toBeGreaterThan(3);
      expect(restarts).toBe(1);
      // Over TCP each drop fails every command in flight on the connection: fewer, each worth more.
      expect(faultStats().droppedAfter + faultStats().droppedBefore).toBeGreaterThan(
        transport === "tcp" ? 5 : 10,
      );
      // Each kind of receiver fault happened, and some leases ended before their answer.
      for (const answer of ["error", "slow", "hang", "reset"] as const) {
        expect(answers[answer], `receiver faults: ${answer}`).toBeGreaterThan(0);
      }
      expect(push.counts.redelivered).toBeGreaterThan(0);
    },
    (2 * SECONDS + 120) * 1000,
  );
});
