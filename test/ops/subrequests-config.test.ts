// DQ_SUBREQUESTS: a Worker invocation's limit by default, a loose bound on Node, set either way.
import { describe, expect, it } from "vitest";
import { EnvSchema, NodeEnvSchema, parseConfig } from "../../src/config";

const REST = { UPSTASH_REDIS_REST_URL: "https://x.upstash.io", UPSTASH_REDIS_REST_TOKEN: "t" };

describe("DQ_SUBREQUESTS", () => {
  it("defaults to the Workers limit on the Worker and to 100,000 on Node, which has none", () => {
    expect(parseConfig({ DQ_TOKENS: "a", ...REST }).DQ_SUBREQUESTS).toBe(1000);
    expect(parseConfig({ DQ_TOKENS: "a", ...REST }, NodeEnvSchema).DQ_SUBREQUESTS).toBe(100_000);
  });

  it("takes the value set, on both", () => {
    const env = { DQ_TOKENS: "a", ...REST, DQ_SUBREQUESTS: "45" };
    expect(parseConfig(env, EnvSchema).DQ_SUBREQUESTS).toBe(45);
    expect(parseConfig(env, NodeEnvSchema).DQ_SUBREQUESTS).toBe(45);
  });
});
