// Test helpers for subrequest budgets: a Redis client that counts its calls into the invocation
// the caller runs in (the fetch counter of bench/lib/subrequests.ts tells which one), around the
// real client, and reports each claim's records as it passes.

import type { FetchCounter } from "../../bench/lib/subrequests";
import { scriptText } from "../../src/redis/lua/scripts";
import { claim } from "../../src/redis/lua/scripts/push";
import type { RedisClient } from "../../src/redis/runner";

/**
 * `redis`, unchanged, except that each call (a script, GET) adds one to `redisCalls` of the
 * invocation it is made in, and each claim's reply is also handed to `onClaim`.
 */
export function countingRedis(
  redis: RedisClient,
  fetches: FetchCounter,
  onClaim?: (reply: ReturnType<typeof claim.parse>) => void,
): RedisClient {
  const count = () => {
    const counts = fetches.current()?.counts ?? fetches.outside;
    counts.redisCalls = (counts.redisCalls ?? 0) + 1;
  };
  const claimText = scriptText(claim);
  return {
    createScript(text) {
      const script = redis.createScript(text);
      return {
        async exec(keys, args) {
          count();
          const reply = await script.exec(keys, args);
          if (text === claimText) onClaim?.(claim.parse(reply));
          return reply;
        },
      };
    },
    get(key) {
      count();
      return redis.get(key);
    },
  };
}
