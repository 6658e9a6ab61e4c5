// The tools some suites need beyond Node and redis-server: a headless Chromium (the dashboard),
// PHP with PHPUnit 9 (the PHP client), Python 3 with venv and pytest (the Python client). Where
// one is missing its suite is skipped and the run says in one line what to install
// (tools-setup.ts); under CI (CI=true, or DQ_REQUIRE_ALL=1 as .ci/run sets) nothing is skipped,
// so a missing tool fails its suite with the same advice.
import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

export type ToolName = "chromium" | "php" | "python";

type Tool = {
  /** The suite that needs it. */
  suite: string;
  /** What is needed and why it is not usable (e.g. "Chromium (none found)"); undefined if it is. */
  check(): string | undefined;
  /** What to install: Debian/Ubuntu packages, and macOS's way. */
  apt: string[];
  mac: string;
};

/** Whether every suite must run: a missing tool then fails its suite instead of skipping it. */
export function requireAll(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.DQ_REQUIRE_ALL === "1" || env.CI === "true";
}

/** The first executable of these names on PATH, or of these paths. */
function findExecutable(names: string[], paths: string[] = []): string | undefined {
  const dirs = (process.env.PATH ?? "").split(delimiter).filter(Boolean);
  for (const candidate of [...names.flatMap((name) => dirs.map((d) => join(d, name))), ...paths]) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here; the next one
    }
  }
  return undefined;
}

/** The browser the dashboard's tests drive: CHROMIUM_BIN, else a Chromium or Chrome installed. */
export function chromiumPath(): string | undefined {
  const explicit = process.env.CHROMIUM_BIN;
  if (explicit) return findExecutable([], [explicit]);
  return findExecutable(
    ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"],
    [
      "/usr/bin/chromium",
      "/Applications/Chromium.app/Contents/MacOS/Chromium",
      "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    ],
  );
}

/** Runs a command; answers what it printed, or why it could not run. */
function probe(command: string, args: string[]): { ok: boolean; out: string } {
  const run = spawnSync(command, args, { encoding: "utf8", timeout: 20_000 });
  if (run.error) return { ok: false, out: run.error.message };
  return { ok: run.status === 0, out: `${run.stdout ?? ""}${run.stderr ?? ""}`.trim() };
}

export const PYTHON = process.env.PYTHON ?? "python3";

const TOOLS: Record<ToolName, Tool> = {
  chromium: {
    suite: "test/ops/browser.test.ts",
    check: () =>
      chromiumPath()
        ? undefined
        : process.env.CHROMIUM_BIN
          ? `Chromium (CHROMIUM_BIN=${process.env.CHROMIUM_BIN} is not an executable)`
          : "Chromium (no chromium, chromium-browser or google-chrome found)",
    apt: ["chromium"],
    mac: "brew install --cask google-chrome",
  },
  php: {
    suite: "test/clients/php.test.ts",
    check: () => {
      const php = probe("php", [
        "-r",
        'echo extension_loaded("curl") && extension_loaded("json") ? "ok" : "no curl";',
      ]);
      if (!php.ok || php.out !== "ok")
        return `php with the curl extension (${php.out.slice(0, 80)})`;
      const phpunit = probe("phpunit", ["--version"]);
      if (!phpunit.out.includes("PHPUnit 9.")) return `PHPUnit 9 (${phpunit.out.slice(0, 80)})`;
      return undefined;
    },
    apt: ["php-cli", "php-curl", "php-mbstring", "phpunit"],
    mac: "brew install php composer && composer global require phpunit/phpunit:^9.6",
  },
  python: {
    suite: "test/clients/python.test.ts",
    check: () => {
      const pytest = probe(PYTHON, ["-m", "pytest", "--version"]);
      if (!pytest.ok) return `${PYTHON} with pytest (${pytest.out.slice(-80)})`;
      const venv = probe(PYTHON, ["-c", "import ensurepip, venv"]);
      if (!venv.ok) return `${PYTHON} with venv (${venv.out.slice(-80)})`;
      return undefined;
    },
    // setuptools: the venv's pip builds the package without build isolation (Python 3.12's venv
    // brings none of its own).
    apt: ["python3-venv", "python3-pytest", "python3-setuptools"],
    mac: "python3 -m pip install --user pytest",
  },
};

const checked = new Map<ToolName, string | undefined>();

/** Why the tool is not usable, or undefined when it is (checked once per process). */
export function toolMissing(name: ToolName): string | undefined {
  if (!checked.has(name)) checked.set(name, TOOLS[name].check());
  return checked.get(name);
}

/** What to install for these tools, as one command for this platform. */
export function installAdvice(names: ToolName[], platform = process.platform): string {
  if (platform === "darwin") return names.map((name) => TOOLS[name].mac).join(" && ");
  return `sudo apt-get install -y ${names.flatMap((name) => TOOLS[name].apt).join(" ")}`;
}

/**
 * Whether a suite skips for want of its tool: the reason when the tool is missing and the run
 * may skip, undefined when the suite runs (its tool is there, or every suite must run).
 */
export function skipFor(name: ToolName): string | undefined {
  const missing = toolMissing(name);
  if (missing === undefined || requireAll()) return undefined;
  return `${missing}; install: ${installAdvice([name])}`;
}

/** Throws, with what to install, when the tool is missing (a suite that must run fails). */
export function mustHave(name: ToolName): void {
  const missing = toolMissing(name);
  if (missing !== undefined) {
    throw new Error(`${TOOLS[name].suite} needs ${missing}; install: ${installAdvice([name])}`);
  }
}

/** The one line a run prints when suites are skipped, or undefined when none is. */
export function skippedLine(names: ToolName[] = ["chromium", "php", "python"]): string | undefined {
  if (requireAll()) return undefined;
  const missing = names.filter((name) => toolMissing(name) !== undefined);
  if (missing.length === 0) return undefined;
  const suites = missing.map((name) => TOOLS[name].suite).join(", ");
  return `skipping ${suites} (tools missing); to run them: ${installAdvice(missing)}`;
}
