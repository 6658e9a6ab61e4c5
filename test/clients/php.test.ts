// Runs the PHP client's PHPUnit suite (clients/php) against a real service; fails with its output.
import { spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { signWebhook } from "../../src/dispatch/signature";
import { startTestService, type TestService } from "../support/service";
import { mustHave, skipFor } from "../support/tools";

const root = join(import.meta.dirname, "..", "..");
const clientDir = join(root, "clients", "php");
/** Fewer tests than this means files or classes went missing, not that all is well. */
const MIN_TESTS = 60;

/** Why the suite is skipped: no PHP or PHPUnit 9, outside CI (tools-setup.ts prints it). */
const skip = skipFor("php");

let service: TestService;
let workDir: string;

beforeAll(async () => {
  if (skip) return;
  mustHave("php");
  workDir = mkdtempSync(join(tmpdir(), "delayq-php-"));
  service = await startTestService({
    vars: {
      // An Alipay account for the payment-watch tests once /v1/payments is served; nothing
      // listens at its baseUrl, so its polls fail and are retried, never reaching Alipay.
      DQ_ALIPAY_ACCOUNTS: JSON.stringify({ shop: fakeAlipayAccount() }),
      // Push deliveries and due jobs without waiting for the minute's tick.
      DQ_TICK_INTERVAL_MS: "1000",
    },
  });
}, 60_000);

afterAll(async () => {
  await service?.stop();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

it.skipIf(skip)(
  "passes PHPUnit against the service",
  async () => {
    const vectors = join(workDir, "signature-vectors.json");
    writeFileSync(vectors, JSON.stringify(await signatureVectors()));
    const junit = join(workDir, "junit.xml");
    const run = await runPhpunit(["--verbose", "--log-junit", junit], {
      DELAYQ_URL: service.url,
      DELAYQ_TOKEN: service.token,
      DELAYQ_SCOPED_TOKEN: service.scopedToken,
      DELAYQ_SIGNATURE_VECTORS: vectors,
      DELAYQ_PAYMENT_ACCOUNT: "shop",
    });
    const output = `${run.stdout}\n${run.stderr}`;
    const summary = junitSummary(junit);
    // Skipped tests say why (a route not served yet): shown, never silent.
    for (const line of skippedReasons(run.stdout)) console.log(`php: skipped: ${line}`);
    if (run.code !== 0 || summary.failures + summary.errors > 0) {
      console.error(output);
    }
    expect(run.code, `phpunit exited with ${run.code}:\n${output}`).toBe(0);
    expect(summary.failures + summary.errors, output).toBe(0);
    expect(summary.tests, `only ${summary.tests} tests ran:\n${output}`).toBeGreaterThanOrEqual(
      MIN_TESTS,
    );
  },
  120_000,
);

type Run = { code: number | null; stdout: string; stderr: string };

function runPhpunit(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn("phpunit", ["-c", join(clientDir, "phpunit.xml"), ...args], {
      cwd: clientDir,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 110_000);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function junitSummary(path: string): {
  tests: number;
  failures: number;
  errors: number;
  skipped: number;
} {
  let xml: string;
  try {
    xml = readFileSync(path, "utf8");
  } catch {
    return { tests: 0, failures: 0, errors: 0, skipped: 0 };
  }
  // The first <testsuite> element holds the totals of the whole run.
  const head = /<testsuite [^>]*>/.exec(xml)?.[0] ?? "";
  const count = (name: string) => Number(new RegExp(`\\b${name}="(\\d+)"`).exec(head)?.[1] ?? 0);
  return {
    tests: count("tests"),
    failures: count("failures"),
    errors: count("errors"),
    skipped: count("skipped"),
  };
}

/** PHPUnit --verbose lists each skipped test with its message: "N) Class::test\nreason". */
function skippedReasons(stdout: string): string[] {
  const section = stdout.split(/There (?:was|were) \d+ skipped tests?:/)[1];
  if (!section) return [];
  const reasons: string[] = [];
  const pattern = /^\d+\) (\S+)\n(.+)$/gm;
  for (let match = pattern.exec(section); match; match = pattern.exec(section)) {
    reasons.push(`${match[1]}: ${match[2]}`);
  }
  return reasons;
}

/**
 * Signatures made by the service's own signWebhook, for the PHP verifier to accept; the suite
 * derives the tampered and stale cases from them.
 */
async function signatureVectors(): Promise<unknown> {
  const cases = [
    { name: "json", secret: "whsec_0123456789abcdef", body: '{"id":"order-1","attempt":1}' },
    { name: "unicode", secret: "sécret-ключ-🔑-0123", body: '{"note":"café 支付 🚀"}' },
    { name: "empty body", secret: "whsec_empty_body_secret", body: "" },
    { name: "newlines", secret: "whsec_newlines_0000", body: '{\n  "a": 1,\n  "b": "x\\ny"\n}\n' },
    { name: "long", secret: "k".repeat(100), body: JSON.stringify({ blob: "z".repeat(10_000) }) },
  ];
  const at = 1_800_000_000_123;
  const vectors = await Promise.all(
    cases.map(async (c, i) => ({
      ...c,
      at: at + i * 1000,
      header: await signWebhook(c.secret, c.body, at + i * 1000),
    })),
  );
  const now = Date.now();
  const fresh = { secret: "whsec_fresh_signature", body: '{"fresh":true}' };
  const stale = { secret: "whsec_stale_signature", body: '{"stale":true}' };
  const rotated = {
    oldSecret: "whsec_old_secret_before_rotation",
    newSecret: "whsec_new_secret_after_rotation",
    body: '{"id":"rotating","attempt":2}',
    at,
  };
  const oldHeader = await signWebhook(rotated.oldSecret, rotated.body, at);
  const newHeader = await signWebhook(rotated.newSecret, rotated.body, at);
  return {
    vectors,
    fresh: { ...fresh, header: await signWebhook(fresh.secret, fresh.body, now) },
    stale: { ...stale, header: await signWebhook(stale.secret, stale.body, now - 3600_000) },
    // Both v1 values over the same timestamp, as sent while a secret rotates.
    rotated: { ...rotated, header: `${oldHeader},${newHeader.split(",")[1]}` },
  };
}

/** An Alipay account with a fresh key pair; its baseUrl is a port nothing listens on. */
function fakeAlipayAccount(): Record<string, string> {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return {
    appId: "2021000000000000",
    privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    alipayPublicKey: publicKey.export({ type: "spki", format: "pem" }).toString(),
    baseUrl: "http://127.0.0.1:9",
  };
}
