// Load with faults — consumers SIGKILLed mid-reservation, three schedulers at once, redis-server
// killed and restarted (AOF, fsync always), a proxy dropping, delaying and 5xx-ing requests to
// Redis — then the history checker: nothing lost, early, doubled or accepted stale.
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
import { createClient } from "../../src/client";
import { createApp } from "../../src/http/app";
import { parseTokens } from "../../src/http/auth";
import { DelayQueue, REDIS_CLIENT_OPTIONS, tick } from "../../src/index";
import { checkHistory, type HistoryEvent, parseLog } from "./support/history";

const SECONDS = Number(process.env.DQ_RELIABILITY_SECONDS ?? 20);
const CONSUMERS = 4;
const TOPIC = "rel";
const TOKEN = "reliability-token";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const cleanup: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
});

describe("faults", () => {
  it(
    "keeps every guarantee through kills, restarts and a lossy network",
    async () => {
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

      // The service, as functions/node.ts builds it, talking to Redis through the proxy.
      const queue = (pollIntervalMs = 200) =>
        new DelayQueue({
          redis: new Redis({
            url: proxy.url,
            token: "bridge",
            ...REDIS_CLIENT_OPTIONS,
            retry: { retries: 1, backoff: () => 20 },
          }),
          prefix: TOPIC,
          pollIntervalMs,
        });
      const app = createApp({ queue: queue(), tokens: parseTokens(TOKEN), log: () => undefined });
      const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
      await new Promise((r) => server.once("listening", r));
      cleanup.push(() => new Promise((r) => server.close(r)));
      const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const api = createClient({ baseUrl: apiUrl, token: TOKEN, retries: 10, retryDelayMs: 50 });

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
      let running = true;
      const acked = new Set<string>();
      const ackedBeforeRestart = new Set<string>();
      const deleted = new Set<string>();

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
      const deleteSome = async () => {
        while (running) {
          await sleep(150);
          const candidates = [...acked].filter((id) => !deleted.has(id));
          const id = candidates[Math.floor(Math.random() * candidates.length)];
          if (!id) continue;
          const sentAt = Date.now();
          try {
            await api.delete(id);
            deleted.add(id);
            events.push({ type: "delete", id, sentAt, ackAt: Date.now() });
          } catch {
            // not acknowledged: it may or may not be deleted; the checker does not count on it
          }
        }
      };
      const schedulers = Array.from({ length: 3 }, async () => {
        const mine = queue();
        while (running) {
          await tick(mine).catch(() => undefined);
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
        for (const id of acked) ackedBeforeRestart.add(id);
        redis.process.kill("SIGKILL");
        await new Promise((r) => redis.process.once("exit", r));
        await sleep(300);
        redis = await startRedisServer({ ...aof, port: redis.port });
        restarts += 1;
      };

      const load = [produce(), deleteSome(), killer(), restarter(), ...schedulers];
      await sleep(SECONDS * 1000);
      running = false;
      await Promise.all(load);

      // Faults off; the consumers drain what is left.
      Object.assign(proxy.faults, NO_FAULTS);
      const drainUntil = Date.now() + 60_000;
      let counts = (await api.topic(TOPIC)).counts;
      while (counts.delayed + counts.ready + counts.reserved > 0 && Date.now() < drainUntil) {
        await sleep(250);
        counts = (await api.topic(TOPIC)).counts;
      }
      await stopConsumers();

      const logs = readdirSync(dir)
        .filter((name) => name.endsWith(".log"))
        .flatMap((name) => parseLog(readFileSync(join(dir, name), "utf8")));
      // Every add acknowledged before the restart survived it, and the end state agrees.
      const states = new Map<string, string>();
      for (const id of acked) states.set(id, (await api.get(id)).state);
      const { violations, counts: figures } = checkHistory([...events, ...logs], states);
      const wrongEnd = [...acked].filter(
        (id) => states.get(id) !== (deleted.has(id) ? "deleted" : "finished"),
      );
      const lostInRestart = [...ackedBeforeRestart].filter(
        (id) => !["finished", "deleted"].includes(states.get(id) ?? "missing"),
      );

      console.log(
        `reliability: ${figures.added} jobs, ${figures.deliveries} deliveries ` +
          `(${figures.redelivered} redelivered), ${figures.finished} finished, ` +
          `${figures.deleted} deleted; ${kills} consumers killed, ${restarts} redis restarts, ` +
          `proxy: ${proxy.stats.droppedBefore} dropped before, ${proxy.stats.droppedAfter} ` +
          `dropped after, ${proxy.stats.errors} 5xx, ${proxy.stats.delayed} delayed, ` +
          `${proxy.stats.passed} passed; violations: ${violations.length}`,
      );
      expect(violations.slice(0, 10)).toEqual([]);
      expect(wrongEnd.slice(0, 10)).toEqual([]);
      expect(lostInRestart).toEqual([]);
      expect(counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
      expect(figures.added).toBeGreaterThan(500);
      expect(kills).toBeGreaterThan(3);
      expect(restarts).toBe(1);
      expect(proxy.stats.droppedAfter + proxy.stats.droppedBefore).toBeGreaterThan(10);
    },
    (SECONDS + 120) * 1000,
  );
});
