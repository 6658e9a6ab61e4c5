// The push receivers of docs/push.md (examples/), run as written, against signed deliveries.
import { type ChildProcess, spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
// Type-checks the examples with the rest of the project (they run in their own processes below).
import type * as expressExample from "../../examples/receiver-express";
import type * as honoExample from "../../examples/receiver-hono";
import { SIGNATURE_HEADER, verifySignature } from "../../src/client";
import { testPushApp } from "../support/push";

const root = join(import.meta.dirname, "..", "..");
const SECRET = "whsec_receiver_example_0123456789";
const started: ChildProcess[] = [];

afterAll(() => {
  for (const child of started) child.kill("SIGTERM");
});

/** The signature header as delayq sends it, computed with node:crypto rather than our code. */
function sign(raw: string, secret = SECRET, at = Date.now()): string {
  const t = Math.floor(at / 1000);
  return `t=${t},v1=${createHmac("sha256", secret).update(`${t}.${raw}`, "utf8").digest("hex")}`;
}

/** Starts an example as a user would (`tsx examples/<file>`), on a free port. */
async function start(file: string): Promise<{ url: string; output: () => string }> {
  const child = spawn(process.execPath, ["--import", "tsx", join("examples", file)], {
    cwd: root,
    env: { ...process.env, PORT: "0", DELAYQ_PUSH_SECRET: SECRET },
    stdio: ["ignore", "pipe", "pipe"],
  });
  started.push(child);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  const port = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${file} did not start:\n${output}`)), 15_000);
    const check = () => {
      const match = /listening on (\d+)/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on("data", check);
    child.on("exit", (code) => reject(new Error(`${file} exited with ${code}:\n${output}`)));
  });
  return { url: `http://127.0.0.1:${port}/hooks/delayq`, output: () => output };
}

async function deliver(url: string, raw: string, signature: string | undefined) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (signature !== undefined) headers[SIGNATURE_HEADER] = signature;
  const res = await fetch(url, { method: "POST", headers, body: raw });
  return { status: res.status, json: (await res.json()) as unknown };
}

const examples: Record<string, keyof typeof honoExample | keyof typeof expressExample> = {
  "receiver-hono.ts": "app",
  "receiver-express.ts": "app",
};

describe.each(Object.keys(examples))("examples/%s", (file) => {
  it("accepts a signed delivery and answers done", async () => {
    const receiver = await start(file);
    // Spacing, a number JavaScript cannot hold and non-ASCII text: a receiver that verified a
    // re-serialized body instead of the bytes it got would refuse this.
    const raw =
      '{"id":"order-1042", "topic":"payments","body":{"tx":4200001234567890123,"note":"订单 ✓"},' +
      '"attempt":2,"dueAt":1800000000000}';
    expect(await deliver(receiver.url, raw, sign(raw))).toEqual({
      status: 200,
      json: { status: "done" },
    });
    expect(receiver.output()).toContain("job order-1042 of payments, attempt 2");

    // A large delivery (a 256 KiB body, delayq's default limit) is read whole.
    const big = JSON.stringify({
      id: "big",
      topic: "t",
      body: "x".repeat(256 * 1024),
      attempt: 1,
      dueAt: 1,
    });
    expect((await deliver(receiver.url, big, sign(big))).status).toBe(200);
  }, 30_000);

  it("settles delayq's own push delivery: the job is finished", async () => {
    const receiver = await start(file);
    const t = testPushApp();
    const put = await t.call("PUT", "/v1/topics/payments", {
      body: { push: { url: receiver.url, secret: SECRET } },
    });
    expect(put.status).toBe(200);
    const body = '{"order":"1042","tx":4200001234567890123}';
    await t.call("POST", "/v1/jobs", {
      body: `{"topic":"payments","id":"order-1042","body":${body}}`,
    });
    // Due now, so the add delivers it itself.
    await t.settled();
    const { job } = (await t.call("GET", "/v1/jobs/order-1042")).json;
    expect(job).toMatchObject({ state: "finished", lastDelivery: { status: 200 } });
    expect(receiver.output()).toContain("job order-1042 of payments, attempt 1");
  }, 30_000);

  it("refuses an unsigned, forged, altered or stale delivery with 401", async () => {
    const receiver = await start(file);
    const raw = '{"id":"o-1","topic":"payments","body":null,"attempt":1,"dueAt":1}';
    const refused = [
      undefined,
      "",
      sign(raw, "another-secret-0123456789"),
      sign(`${raw} `),
      sign(raw, SECRET, Date.now() - 400_000),
      "t=123,v1=zz",
    ];
    for (const signature of refused) {
      const res = await deliver(receiver.url, raw, signature);
      expect(res, String(signature)).toEqual({ status: 401, json: { error: "bad signature" } });
    }
    expect(receiver.output()).not.toContain("job o-1");
  }, 30_000);
});

describe("docs/push.md", () => {
  it("shows both examples exactly as they are in examples/", () => {
    const page = readFileSync(join(root, "docs", "push.md"), "utf8");
    for (const file of Object.keys(examples)) {
      const source = readFileSync(join(root, "examples", file), "utf8").trim();
      expect(page.includes(source), `docs/push.md must show examples/${file} as it is`).toBe(true);
    }
  });

  it("exports the verifier from delayq/client, the same one node:crypto's signatures pass", async () => {
    const raw = '{"id":"x"}';
    expect(await verifySignature(SECRET, sign(raw), raw)).toBe(true);
    expect(SIGNATURE_HEADER).toBe("delayq-signature");
  });
});
