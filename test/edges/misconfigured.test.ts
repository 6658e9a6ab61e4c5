// A variable that is wrong stops the service with one line naming the variable (and, for a list,
// the entry's position), never its text: a secret may sit in any variable, a token pasted where a
// DQ_TOKENS scope goes above all. (The Worker's side, 500 misconfigured on every route, is in
// test/workers/worker.test.ts.)
import { Redis } from "@upstash/redis";
import { describe, expect, it } from "vitest";
import { NodeEnvSchema, parseConfig } from "../../src/config";
import { DelayqError } from "../../src/domain/errors";
import { buildService } from "../../src/service";
import { spawnNodeEntry } from "../support/service";

const MARK = "Sekr1t";
const base = {
  UPSTASH_REDIS_REST_URL: "https://pleased-cat-12345.upstash.io",
  UPSTASH_REDIS_REST_TOKEN: "rest-token",
  DQ_TOKENS: "admin-token",
};

/** Why buildService refuses `env` (as the Node entry reads it). */
function refusal(env: Record<string, string>): string {
  try {
    const all = { ...base, ...env };
    buildService(all, (s) => new Redis({ url: s.url, token: s.token }), {
      config: parseConfig(all, NodeEnvSchema),
    });
  } catch (error) {
    if (error instanceof DelayqError) return error.message;
    throw error;
  }
  throw new Error("buildService accepted the environment");
}

describe("DQ_TOKENS", () => {
  it.each([
    [`admin-token,tenant-${MARK}:shop.*|${MARK} x`, /entry 2: pattern 2 .* not a valid topic/],
    [`admin-token,tenant:${MARK}/shop`, /entry 2: pattern 1 .* not a valid payment account/],
    [`admin-token,:${MARK}`, /entry 2: has no token/],
    [`${MARK}-a,${MARK} b`, /entry 2: its token contains a space/],
    [`${MARK}-a,x,${MARK}-a:t`, /entry 3: repeats the token of entry 1/],
  ])("%s: names the entry by position, quoting none of it", (tokens, why) => {
    const message = refusal({ DQ_TOKENS: tokens });
    expect(message).toMatch(/^delayq is misconfigured: DQ_TOKENS: entry \d: /);
    expect(message).toMatch(why);
    expect(message).not.toContain(MARK);
  });

  it("stops the Node entry with that one line (exit 1, no stack)", async () => {
    const entry = spawnNodeEntry({ ...base, DQ_TOKENS: `admin-token,tenant:shop.*|${MARK} x` });
    expect(await entry.exited).toBe(1);
    const output = entry.output().trim();
    expect(output.split("\n")).toHaveLength(1);
    expect(output).toMatch(
      /^delayq is misconfigured: DQ_TOKENS: entry 2: pattern 2 \(after the token's colon, counting by \|\) is not a valid topic pattern/,
    );
    expect(output).not.toContain(MARK);
    expect(output).not.toContain("admin-token");
  });
});

describe("every other variable", () => {
  it.each([
    ["REDIS_URL", `redis://user:${MARK}@[bad`],
    ["UPSTASH_REDIS_REST_URL", `https://${MARK} x.upstash.io`],
    ["DQ_PREFIX", `${MARK} prefix`],
    ["DQ_RETENTION_SECONDS", MARK],
    ["DQ_DEFAULT_TTR", `${MARK}1`],
    ["DQ_MAX_REQUEST_BYTES", "1"],
    ["DQ_PUBLIC_URL", MARK],
    ["QSTASH_URL", `ftp://${MARK}`],
    ["DQ_PRIVATE_PUSH", MARK],
    ["DQ_ALIPAY_ACCOUNTS", `{"${MARK}": `],
    ["DQ_WECHATPAY_ACCOUNTS", `["${MARK}"]`],
    ["DQ_ALIPAY_ACCOUNTS", JSON.stringify({ shop: { appId: MARK } })],
    ["PORT", MARK],
    ["HOST", ""],
  ])("%s=%s: named, its value not quoted", (name, value) => {
    const message = refusal({ [name]: value });
    expect(message).toContain(name);
    expect(message).not.toContain(MARK);
    expect(message.split("\n")).toHaveLength(1);
  });
});
