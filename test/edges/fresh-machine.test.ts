// What `npm test` says on a machine without the optional tools, or without redis-server: the
// node project's tools-setup prints one line naming the skipped suites and the packages that run
// them (nothing under CI, where the suites fail instead), and the global setup stops the run with
// one line when redis-server is missing. Each runs as vitest runs it: a fresh Node process.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { chromiumPath, installAdvice, requireAll } from "../support/tools";

const root = join(import.meta.dirname, "..", "..");
const tsx = join(root, "node_modules", ".bin", "tsx");
const dir = mkdtempSync(join(tmpdir(), "delayq-fresh-"));
/** A PATH holding node alone: no php, phpunit, python3 or chromium on it. */
const nodeOnly = join(dir, "bin");
mkdirSync(nodeOnly);
symlinkSync(process.execPath, join(nodeOnly, "node"));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs a script with tsx in an environment of its own; answers its exit code and output. */
function run(name: string, code: string, env: Record<string, string>) {
  const file = join(dir, `${name}.mts`);
  writeFileSync(file, code);
  const result = spawnSync(tsx, [file], {
    cwd: root,
    encoding: "utf8",
    timeout: 60_000,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? dir, ...env },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** Tools looked for where none is: no browser, no PHP on PATH, no Python. */
const WITHOUT_TOOLS = {
  CHROMIUM_BIN: join(dir, "no-chromium"),
  PYTHON: join(dir, "no-python3"),
  PATH: nodeOnly,
};

describe("a machine without the optional tools", () => {
  const setup = `import setup from ${JSON.stringify(join(root, "test/support/tools-setup.ts"))};\nsetup();\n`;

  it("is told in one line which suites skip and what installs their tools", () => {
    const { status, stdout, stderr } = run("tools", setup, WITHOUT_TOOLS);
    expect(status, stderr).toBe(0);
    const lines = stdout.split("\n").filter((line) => line !== "");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^skipping test\/ops\/browser\.test\.ts, test\/clients\/php\.test\.ts/,
    );
    expect(lines[0]).toContain(
      "sudo apt-get install -y chromium php-cli php-curl php-mbstring phpunit python3-venv",
    );
  });

  it("is told nothing under CI, where the suites must run (and so fail)", () => {
    const settings: Record<string, string>[] = [{ CI: "true" }, { DQ_REQUIRE_ALL: "1" }];
    for (const ci of settings) {
      const { status, stdout } = run("tools-ci", setup, { ...WITHOUT_TOOLS, ...ci });
      expect(status).toBe(0);
      expect(stdout.trim()).toBe("");
    }
  });

  it("reads CI from CI=true or DQ_REQUIRE_ALL=1, and advises brew on macOS", () => {
    expect(requireAll({})).toBe(false);
    expect(requireAll({ CI: "true" })).toBe(true);
    expect(requireAll({ DQ_REQUIRE_ALL: "1" })).toBe(true);
    expect(installAdvice(["chromium"], "darwin")).toBe("brew install --cask google-chrome");
    expect(installAdvice(["chromium", "python"], "linux")).toBe(
      "sudo apt-get install -y chromium python3-venv python3-pytest python3-setuptools",
    );
  });

  it("finds the browser CHROMIUM_BIN names, or none when it names nothing there", () => {
    const saved = process.env.CHROMIUM_BIN;
    try {
      process.env.CHROMIUM_BIN = process.execPath;
      expect(chromiumPath()).toBe(process.execPath);
      process.env.CHROMIUM_BIN = join(dir, "no-chromium");
      expect(chromiumPath()).toBeUndefined();
    } finally {
      if (saved === undefined) delete process.env.CHROMIUM_BIN;
      else process.env.CHROMIUM_BIN = saved;
    }
  });
});

describe("a machine without redis-server", () => {
  it("stops the run with one line saying how to install it", () => {
    const code =
      `import setup from ${JSON.stringify(join(root, "test/support/global-setup.ts"))};\n` +
      "await setup({ provide() {} } as never);\nconsole.log('started anyway');\n";
    const { status, stdout, stderr } = run("redis", code, {
      REDIS_SERVER_BIN: join(dir, "no-redis-server"),
    });
    expect(status).toBe(1);
    expect(stdout).not.toContain("started anyway");
    const lines = stderr.split("\n").filter((line) => line !== "");
    expect(lines).toEqual([
      "npm test needs redis-server: sudo apt-get install -y redis-server (macOS: brew install " +
        "redis), or set REDIS_SERVER_BIN to a redis-server binary",
    ]);
  });
});
