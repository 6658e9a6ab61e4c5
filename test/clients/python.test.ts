// The Python client: pip-installs clients/python into a fresh venv, type-checks it with pyright
// in strict mode, and runs its pytest suite against the service, with webhook signatures made by
// the service's own signWebhook.
import { type SpawnOptions, spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { signWebhook } from "../../src/dispatch/signature";
import { startTestService, type TestService } from "../support/service";
import { mustHave, PYTHON, skipFor } from "../support/tools";

const root = join(import.meta.dirname, "..", "..");
const packageDir = join(root, "clients", "python");
const python = PYTHON;
/** Why the suite is skipped: no Python with venv and pytest, outside CI (tools-setup.ts prints it). */
const skip = skipFor("python");
const ALIPAY_ACCOUNT = "pytest";

type Run = { code: number | null; output: string; stdout: string };

/** Runs a command to its end: output is stdout and stderr together, stdout alone; never rejects. */
function run(command: string, args: string[], options: SpawnOptions = {}): Promise<Run> {
  return new Promise((resolve) => {
    let output = "";
    let stdout = "";
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      stdout += chunk.toString();
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on("error", (error) =>
      resolve({ code: null, output: `${output}${error.message}`, stdout }),
    );
    child.on("close", (code) => resolve({ code, output, stdout }));
  });
}

async function must(what: string, command: string, args: string[], options: SpawnOptions = {}) {
  const result = await run(command, args, options);
  if (result.code !== 0) {
    throw new Error(`${what} failed (${command} ${args.join(" ")}):\n${result.output}`);
  }
  return result.output;
}

/** Headers from the service's signer, for the suite's verify_signature tests. */
async function signatureVectors(): Promise<unknown> {
  const delivery = JSON.stringify({
    id: "order-1042",
    topic: "payments",
    body: { order: "1042", provider: "wechatpay" },
    attempt: 1,
    dueAt: 1_800_000_000_000,
  });
  const cases = [
    { secret: "whsec_0123456789abcdef", body: delivery, at: 1_800_000_000_123 },
    { secret: "s3cret-ünïcode-ключ", body: '{"note":"价格 ¥100 🎉"}', at: 1_700_000_000_999 },
    { secret: "k".repeat(64), body: "", at: 1_750_000_000_000 },
    { secret: "short-secret-16c", body: "plain text\nnot JSON", at: 1_760_000_000_500 },
  ];
  const signed = await Promise.all(
    cases.map(async (c) => ({ ...c, header: await signWebhook(c.secret, c.body, c.at) })),
  );
  const now = Date.now();
  const fresh = { secret: "fresh-secret-0001", body: delivery, at: now };
  const stale = { secret: "stale-secret-0001", body: delivery, at: now - 3_600_000 };
  const rotatedAt = 1_800_000_100_000;
  const oldHeader = await signWebhook("rotating-old-secret", delivery, rotatedAt);
  const newHeader = await signWebhook("rotating-new-secret", delivery, rotatedAt);
  return {
    signed,
    fresh: { ...fresh, header: await signWebhook(fresh.secret, fresh.body, fresh.at) },
    stale: { ...stale, header: await signWebhook(stale.secret, stale.body, stale.at) },
    rotated: {
      secrets: ["rotating-old-secret", "rotating-new-secret"],
      body: delivery,
      at: rotatedAt,
      // Both signatures over the same t, as delayq sends them while a secret rotates.
      header: `${oldHeader},${newHeader.slice(newHeader.indexOf("v1="))}`,
    },
  };
}

/** An Alipay account for the payment-watch tests; its gateway is the discard port. */
function alipayAccounts(): string {
  const pem = { type: "spki", format: "pem" } as const;
  const merchant = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    publicKeyEncoding: pem,
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
  const alipay = generateKeyPairSync("rsa", {
    modulusLength: 2048,
    publicKeyEncoding: pem,
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
  return JSON.stringify({
    [ALIPAY_ACCOUNT]: {
      appId: "2021000000000001",
      privateKey: merchant.privateKey,
      alipayPublicKey: alipay.publicKey,
      baseUrl: "http://127.0.0.1:9",
    },
  });
}

let service: TestService | undefined;
let scratch: string;
let venvPython: string;
let vectorsFile: string;

beforeAll(async () => {
  if (skip) return;
  // Under CI a missing interpreter, venv or pytest fails the suite, with what to install.
  mustHave("python");
  scratch = mkdtempSync(join(tmpdir(), "delayq-python-"));
  vectorsFile = join(scratch, "signature-vectors.json");
  writeFileSync(vectorsFile, JSON.stringify(await signatureVectors()));
  const venv = join(scratch, "venv");
  venvPython = join(venv, "bin", "python");
  const install = (async () => {
    // --system-site-packages for pytest; the package itself comes from pip, offline.
    await must("creating a venv", python, ["-m", "venv", "--system-site-packages", venv]);
    await must("pip install ./clients/python", venvPython, [
      "-m",
      "pip",
      "install",
      "--quiet",
      "--no-build-isolation",
      "--no-index",
      "--no-deps",
      packageDir,
    ]);
  })();
  const [started] = await Promise.all([
    startTestService({ vars: { DQ_ALIPAY_ACCOUNTS: alipayAccounts() } }),
    install,
  ]);
  service = started;
}, 120_000);

afterAll(async () => {
  await service?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

it.skipIf(skip)(
  "installs with pip and imports as delayq from the venv, not the source tree",
  async () => {
    const output = await must("importing delayq", venvPython, [
      "-c",
      "import delayq, os; print(os.path.dirname(delayq.__file__)); print(delayq.__version__)",
    ]);
    const [where, version] = output.trim().split("\n");
    expect(where?.startsWith(join(scratch, "venv"))).toBe(true);
    expect(where?.endsWith(join("site-packages", "delayq"))).toBe(true);
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
  },
  30_000,
);

/** METADATA of the wheel, read by Python's own parser of that format (email headers). */
const READ_METADATA = `
import email, json, sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
[name] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
meta = email.message_from_string(wheel.read(name).decode("utf-8"))  # METADATA is UTF-8
print(json.dumps({
    "name": meta["Name"], "summary": meta["Summary"], "license": meta["License"],
    "contentType": meta["Description-Content-Type"], "urls": meta.get_all("Project-URL"),
    "description": meta.get_payload(),
}))
`;

it.skipIf(skip)(
  "builds a wheel whose metadata carries the README as its description and the project URLs",
  async () => {
    // As a user builds it where no index is reachable; where setuptools can build wheels itself
    // (>= 70.1, or with `wheel`), the backend is setuptools.build_meta and this checks its output.
    const out = join(scratch, "wheel");
    await must("pip wheel ./clients/python", venvPython, [
      "-m",
      "pip",
      "wheel",
      "--quiet",
      "--no-build-isolation",
      "--no-index",
      "--no-deps",
      "--wheel-dir",
      out,
      packageDir,
    ]);
    const [wheel] = readdirSync(out).filter((name) => name.endsWith(".whl"));
    expect(wheel).toMatch(/^delayq-\d+\.\d+\.\d+-py3-none-any\.whl$/);
    const printed = await must("reading METADATA", venvPython, [
      "-c",
      READ_METADATA,
      join(out, wheel ?? ""),
    ]);
    const meta = JSON.parse(printed.trim().split("\n").at(-1) ?? "") as {
      name: string;
      summary: string;
      license: string;
      contentType: string;
      urls: string[] | null;
      description: string;
    };
    const readme = readFileSync(join(packageDir, "README.md"), "utf8");
    expect(meta.name).toBe("delayq");
    expect(meta.summary).toMatch(/delayq/);
    expect(meta.license).toBe("MIT");
    expect(meta.contentType).toBe("text/markdown");
    expect(meta.description.trim()).toBe(readme.trim());
    // The URLs are pyproject.toml's [project.urls], each as "Label, URL".
    const pyproject = readFileSync(join(packageDir, "pyproject.toml"), "utf8");
    const table = /^\[project\.urls\]\n((?:\w+ = "[^"]+"\n)+)/m.exec(pyproject)?.[1] ?? "";
    const urls = [...table.matchAll(/^(\w+) = "([^"]+)"$/gm)].map((m) => `${m[1]}, ${m[2]}`);
    expect(urls.map((url) => url.split(",")[0])).toEqual(
      expect.arrayContaining(["Homepage", "Repository", "Issues"]),
    );
    expect(meta.urls).toEqual(urls);
  },
  60_000,
);

type PyrightDiagnostic = {
  file: string;
  severity: string;
  message: string;
  rule?: string;
  range?: { start: { line: number; character: number } };
};
type PyrightReport = {
  generalDiagnostics: PyrightDiagnostic[];
  summary: { filesAnalyzed: number; errorCount: number };
};

it.skipIf(skip)(
  "type-checks clean with pyright in strict mode, as its README promises",
  async () => {
    // The pinned devDependency, run on the config in clients/python/pyproject.toml, resolving
    // imports (pytest) with the venv's interpreter, the one the suite runs with.
    const pyright = join(root, "node_modules", ".bin", "pyright");
    const result = await run(pyright, [
      "-p",
      packageDir,
      "--pythonpath",
      venvPython,
      "--outputjson",
    ]);
    let report: PyrightReport;
    try {
      report = JSON.parse(result.stdout) as PyrightReport;
    } catch {
      throw new Error(`pyright gave no JSON report (exit ${result.code}):\n${result.output}`);
    }
    const errors = report.generalDiagnostics
      .filter((d) => d.severity === "error")
      .map((d) => {
        const at = d.range ? `:${d.range.start.line + 1}:${d.range.start.character + 1}` : "";
        return `${d.file}${at} - ${d.message}${d.rule ? ` (${d.rule})` : ""}`;
      });
    if (errors.length > 0) console.log(errors.join("\n"));
    expect(errors, errors.join("\n")).toEqual([]);
    expect(report.summary.errorCount).toBe(0);
    expect(result.code, result.output.slice(-4000)).toBe(0);
    // Both the package and its tests were looked at, not an empty selection.
    const sources = [join(packageDir, "src", "delayq"), join(packageDir, "tests")].flatMap((dir) =>
      readdirSync(dir).filter((name) => name.endsWith(".py")),
    );
    expect(report.summary.filesAnalyzed).toBeGreaterThanOrEqual(sources.length);
  },
  60_000,
);

it.skipIf(skip)(
  "passes its pytest suite against the service",
  async () => {
    if (!service) throw new Error("the service did not start");
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DELAYQ_URL: service.url,
      DELAYQ_TOKEN: service.token,
      DELAYQ_SCOPED_TOKEN: service.scopedToken,
      DELAYQ_SIGNATURE_VECTORS: vectorsFile,
      DELAYQ_ALIPAY_ACCOUNT: ALIPAY_ACCOUNT,
      PYTHONDONTWRITEBYTECODE: "1",
    };
    delete env.PYTHONPATH;
    // -rs lists each skipped test with its reason ("route not served yet: ...").
    const result = await run(venvPython, ["-m", "pytest", "-q", "-rs", "tests"], {
      cwd: packageDir,
      env,
    });
    console.log(result.output);
    expect(result.code, result.output.slice(-4000)).toBe(0);
    expect(result.output).toMatch(/\d+ passed/);
  },
  120_000,
);
