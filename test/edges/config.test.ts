// Configuration mistakes answer one message naming the variable: a Redis TCP URL pasted as the REST
// URL, and the Redis time limit's bounds; on Node the process says so in one line, no stack.
import { type AddressInfo, createServer } from "node:net";
import { Redis } from "@upstash/redis";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config";
import { DelayqError } from "../../src/domain/errors";
import { buildService } from "../../src/service";
import { spawnNodeEntry } from "../support/service";

const PASSWORD = "AbC123secretpw";
const TCP_URL = `rediss://default:${PASSWORD}@pleased-cat-12345.upstash.io:6379`;
const base = {
  UPSTASH_REDIS_REST_URL: "https://pleased-cat-12345.upstash.io",
  UPSTASH_REDIS_REST_TOKEN: "token",
  DQ_TOKENS: "admin",
};

function failure(env: Record<string, unknown>): DelayqError {
  try {
    parseConfig(env);
  } catch (error) {
    if (error instanceof DelayqError) return error;
    throw error;
  }
  throw new Error("parseConfig accepted the environment");
}

describe("UPSTASH_REDIS_REST_URL", () => {
  it.each([TCP_URL, `redis://default:${PASSWORD}@localhost:6379`])(
    "refuses a Redis TCP URL (%s) with the hint that the REST URL is wanted",
    (url) => {
      const error = failure({ ...base, UPSTASH_REDIS_REST_URL: url });
      expect(error.code).toBe("internal_error");
      expect(error.message).toMatch(
        /^delayq is misconfigured: UPSTASH_REDIS_REST_URL is a Redis TCP/,
      );
      expect(error.message).toMatch(/REST URL, https:\/\/<name>\.upstash\.io/);
      expect(error.message).not.toContain(PASSWORD);
    },
  );

  it.each([
    "pleased-cat-12345.upstash.io",
    "ftp://pleased-cat-12345.upstash.io",
    "https://",
    "https://.upstash.io",
  ])("refuses %s, which @upstash/redis would refuse with a stack trace", (url) => {
    expect(() => new Redis({ url, token: "t" })).toThrow();
    expect(failure({ ...base, UPSTASH_REDIS_REST_URL: url }).message).toMatch(
      /UPSTASH_REDIS_REST_URL must be a URL such as https:\/\/<name>\.upstash\.io \(the database's REST URL\)/,
    );
  });

  it("names a stray line break", () => {
    const error = failure({ ...base, UPSTASH_REDIS_REST_URL: `${base.UPSTASH_REDIS_REST_URL}\n` });
    expect(error.message).toMatch(/UPSTASH_REDIS_REST_URL has spaces or a line break/);
  });

  it("takes http and https REST URLs, with or without a path", () => {
    for (const url of ["http://127.0.0.1:8079", "https://x.upstash.io/", "https://x.io/db"]) {
      expect(parseConfig({ ...base, UPSTASH_REDIS_REST_URL: url }).UPSTASH_REDIS_REST_URL).toBe(
        url,
      );
      expect(() => new Redis({ url, token: "t" })).not.toThrow();
    }
  });

  it("turns a client that refuses its settings into the misconfigured error", () => {
    const build = () =>
      buildService(base, () => {
        throw new TypeError(`bad url ${TCP_URL}`);
      });
    expect(build).toThrow(DelayqError);
    expect(build).toThrow(/misconfigured.*UPSTASH_REDIS_REST_URL/);
    expect(build).not.toThrow(new RegExp(PASSWORD));
  });
});

describe("DQ_REDIS_TIMEOUT_MS", () => {
  it("defaults to 5 s and takes 100 ms to 2 min", () => {
    expect(parseConfig(base).DQ_REDIS_TIMEOUT_MS).toBe(5000);
    expect(parseConfig({ ...base, DQ_REDIS_TIMEOUT_MS: "250" }).DQ_REDIS_TIMEOUT_MS).toBe(250);
    expect(failure({ ...base, DQ_REDIS_TIMEOUT_MS: "0" }).message).toMatch(
      /DQ_REDIS_TIMEOUT_MS must be at least 100/,
    );
    expect(failure({ ...base, DQ_REDIS_TIMEOUT_MS: "soon" }).message).toMatch(
      /DQ_REDIS_TIMEOUT_MS must be a number/,
    );
  });
});

describe("DQ_QSTASH_TIMEOUT_MS", () => {
  it("defaults to 5 s and takes 100 ms to 2 min", () => {
    expect(parseConfig(base).DQ_QSTASH_TIMEOUT_MS).toBe(5000);
    expect(parseConfig({ ...base, DQ_QSTASH_TIMEOUT_MS: "250" }).DQ_QSTASH_TIMEOUT_MS).toBe(250);
    expect(failure({ ...base, DQ_QSTASH_TIMEOUT_MS: "99" }).message).toMatch(
      /DQ_QSTASH_TIMEOUT_MS must be at least 100/,
    );
  });
});

describe("whole-number settings", () => {
  it("take an empty value (a compose file's NAME=) as no value: the default, never 0", () => {
    const empty = parseConfig({ ...base, DQ_MIN_POLL_MS: "", DQ_RETENTION_SECONDS: " " });
    expect(empty.DQ_MIN_POLL_MS).toBe(1000);
    expect(empty.DQ_RETENTION_SECONDS).toBe(3600);
    expect(parseConfig({ ...base, DQ_MIN_POLL_MS: "0" }).DQ_MIN_POLL_MS).toBe(0);
  });
});

describe("the edges' bounds", () => {
  it("DQ_DASHBOARD_SESSION_S: 12 h by default, 1 s to 30 days", () => {
    expect(parseConfig(base).DQ_DASHBOARD_SESSION_S).toBe(43_200);
    expect(parseConfig({ ...base, DQ_DASHBOARD_SESSION_S: "1" }).DQ_DASHBOARD_SESSION_S).toBe(1);
    expect(failure({ ...base, DQ_DASHBOARD_SESSION_S: "0" }).message).toMatch(
      /DQ_DASHBOARD_SESSION_S must be at least 1/,
    );
    expect(failure({ ...base, DQ_DASHBOARD_SESSION_S: "12h" }).message).toMatch(
      /DQ_DASHBOARD_SESSION_S must be a number/,
    );
  });

  it("DQ_MAX_WATCHES_PER_TOKEN: 100,000 by default, 0 (none) allowed", () => {
    expect(parseConfig(base).DQ_MAX_WATCHES_PER_TOKEN).toBe(100_000);
    expect(parseConfig({ ...base, DQ_MAX_WATCHES_PER_TOKEN: "0" }).DQ_MAX_WATCHES_PER_TOKEN).toBe(
      0,
    );
    expect(failure({ ...base, DQ_MAX_WATCHES_PER_TOKEN: "-1" }).message).toMatch(
      /DQ_MAX_WATCHES_PER_TOKEN must be at least 0/,
    );
  });
});

describe("functions/node.ts", () => {
  it("exits 1 with one line naming the variable, no stack trace and no password", async () => {
    const entry = spawnNodeEntry({ ...base, UPSTASH_REDIS_REST_URL: TCP_URL, PORT: "1" });
    expect(await entry.exited).toBe(1);
    const output = entry.output();
    expect(output.trim()).toMatch(
      /^delayq is misconfigured: UPSTASH_REDIS_REST_URL is a Redis TCP/,
    );
    expect(output.trim().split("\n")).toHaveLength(1);
    expect(output).not.toMatch(/\n\s+at /);
    expect(output).not.toContain(PASSWORD);
  });

  it("exits 1 with one line naming PORT when the port is taken, no stack trace", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      const entry = spawnNodeEntry({ ...base, HOST: "127.0.0.1", PORT: String(port) });
      expect(await entry.exited).toBe(1);
      expect(entry.output().trim()).toBe(
        `delayq is misconfigured: 127.0.0.1:${port} is in use by another process: set PORT (or HOST) to a free one`,
      );
    } finally {
      taken.close();
    }
  });
});
