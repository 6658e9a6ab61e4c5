// Test helpers: a real @upstash/redis client against the shared bridge, isolated per test.
import { Redis } from "@upstash/redis";
import { inject } from "vitest";
import type { BridgeCounters } from "../../dev/bridge";

export type TestRedis = {
  redis: Redis;
  /** A key prefix no other test uses. */
  prefix: string;
  /** The bearer token this client presents; the bridge counts its requests separately. */
  token: string;
  /** Counters of this client's requests as the bridge saw them. */
  stats(): Promise<BridgeCounters>;
};

/**
 * A client of the shared bridge with its own token label and key prefix, so that tests never see
 * each other's keys and can read exactly their own request counts.
 */
export function testRedis(
  options: { autoPipelining?: boolean; automaticDeserialization?: boolean } = {},
): TestRedis {
  const url = inject("bridgeUrl");
  const label = crypto.randomUUID().slice(0, 8);
  const token = `${inject("bridgeToken")}:${label}`;
  const redis = new Redis({
    url,
    token,
    enableAutoPipelining: options.autoPipelining ?? true,
    automaticDeserialization: options.automaticDeserialization ?? true,
    enableTelemetry: false,
  });
  return {
    redis,
    prefix: `t${label}:`,
    token,
    stats: () => bridgeStats(url, token),
  };
}

export async function bridgeStats(url: string, token: string): Promise<BridgeCounters> {
  const res = await fetch(`${url}/__bridge/stats`, {
    headers: { authorization: `Bearer ${token}` },
  });
  if (!res.ok) throw new Error(`bridge stats: HTTP ${res.status}`);
  return (await res.json()) as BridgeCounters;
}
