// Runs the service as a child process — the worker in `wrangler dev`, or functions/node.ts — for
// the dev stack, the end-to-end test and the benchmarks.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort, portInUse } from "./redis-server";

const root = join(import.meta.dirname, "..");

export type ServiceMode = "wrangler" | "node";

export type ServiceOptions = {
  mode: ServiceMode;
  port: number;
  /** The worker's variables (UPSTASH_REDIS_REST_URL, DQ_TOKENS, ...). */
  vars: Record<string, string>;
  /** Where wrangler keeps its env file and local state. */
  stateDir: string;
  /** The wrangler config, relative to the repository. @default "wrangler.toml" */
  wranglerConfig?: string;
  /** @default "inherit" */
  stdio?: "inherit" | "ignore";
  /** @default 90000 */
  healthTimeoutMs?: number;
};

export type ServiceProcess = {
  url: string;
  child: ChildProcess;
  /** SIGTERM to the whole process group (wrangler starts workerd), SIGKILL after 5 s. */
  stop(): Promise<void>;
};

/** Starts the service and resolves once its /health answers 200. */
export async function startService(options: ServiceOptions): Promise<ServiceProcess> {
  // Else the health check below would be answered by whatever holds the port, not our child.
  if (await portInUse(options.port)) {
    throw new Error(`port ${options.port} is already in use: the service cannot listen there`);
  }
  mkdirSync(options.stateDir, { recursive: true });
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...options.vars,
    PORT: String(options.port),
    WRANGLER_SEND_METRICS: "false",
  };
  let child: ChildProcess;
  if (options.mode === "node") {
    child = startGroup(process.execPath, ["--import", "tsx", "functions/node.ts"], env, options);
  } else {
    // Miniflare fetches a sample `request.cf` from workers.cloudflare.com at start; offline that
    // prints a warning with two ENOTFOUND stack traces, so a first run looks broken. delayq never
    // reads request.cf, so the built-in placeholder serves (unless the caller chose otherwise).
    if (env.CLOUDFLARE_CF_FETCH_ENABLED === undefined && env.CLOUDFLARE_CF_FETCH_PATH === undefined)
      env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
    // The variables reach the worker through this file only: wrangler reads it even if the
    // caller's environment says otherwise, and no more of the environment than the file holds.
    env.CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV = "true";
    env.CLOUDFLARE_INCLUDE_PROCESS_ENV = "false";
    delete env.DOTENV_KEY; // else dotenv looks for an encrypted worker.env.vault first
    const envFile = join(options.stateDir, "worker.env");
    writeFileSync(envFile, formatEnvFile(options.vars), { mode: 0o600 });
    const args = [
      "dev",
      "-c",
      options.wranglerConfig ?? "wrangler.toml",
      "--env-file",
      envFile,
      "--ip",
      "127.0.0.1",
      "--port",
      String(options.port),
      "--test-scheduled",
      // A free devtools port, so that two stacks (say, the e2e test's and yours) can run.
      "--inspector-port",
      String(await freePort()),
      "--persist-to",
      join(options.stateDir, "wrangler"),
      "--show-interactive-dev-session=false",
      "--log-level",
      "warn",
    ];
    child = startGroup(join(root, "node_modules", ".bin", "wrangler"), args, env, options);
  }
  const url = `http://127.0.0.1:${options.port}`;
  const service = { url, child, stop: () => stopGroup(child) };
  try {
    await waitForHealth(url, child, options.healthTimeoutMs ?? 90_000);
  } catch (error) {
    await service.stop();
    throw error;
  }
  return service;
}

/** A variable that wrangler's env file cannot carry; the message names it, never its value. */
export class EnvFileError extends Error {}

/**
 * The env file handed to `wrangler dev --env-file`, which wrangler 4.86 reads back exactly as
 * `vars`. Its reader is dotenv 16.3.1 then dotenv-expand 12.0.2 (both bundled): quotes are
 * stripped with no unescaping, except that in "…" `\n` and `\r` become line breaks; a line break
 * is kept only inside quotes, and CR is read as LF; `$NAME` and `${NAME}` are expanded in every
 * value, and `\$` is read as `$`. Throws EnvFileError for a value no quoting carries.
 */
export function formatEnvFile(vars: Record<string, string>): string {
  return Object.entries(vars)
    .map(([name, value]) => {
      const line = envFileLine(name, value);
      if (line === undefined) {
        throw new EnvFileError(
          /^[A-Za-z_][\w.-]*$/.test(name)
            ? `${name} cannot be passed to wrangler dev: its env file has no way to write a value ` +
                "that holds ' and ` together with \" or a line break or #, or that ends in a " +
                "backslash on more than one line. Change the value, or run the stack on Node: " +
                "npm run dev -- --node"
            : `${JSON.stringify(name)} is not a variable name wrangler dev can read: use ` +
                "letters, digits and _ . - (not starting with a digit)",
        );
      }
      return `${line}\n`;
    })
    .join("");
}

/** One `NAME=value` entry (perhaps over several lines) for formatEnvFile, or undefined. */
export function envFileLine(name: string, value: string): string | undefined {
  if (!/^[A-Za-z_][\w.-]*$/.test(name)) return undefined;
  // dotenv-expand reads `\$` as `$` and expands no `$` after a backslash: every `$` escaped.
  const text = value.replaceAll("$", "\\$");
  // dotenv reads a closing quote after a backslash as part of the value.
  const quotable = !value.endsWith("\\") && !value.includes("\r");
  if (quotable && !value.includes("'")) return `${name}='${text}'`;
  if (quotable && !value.includes("`")) return `${name}=\`${text}\``;
  // Double quotes turn `\n` and `\r` into line breaks, so they carry CR but no backslash-n.
  if (!value.endsWith("\\") && !value.includes('"') && !/\\[nr]/.test(value)) {
    return `${name}="${text.replaceAll("\n", "\\n").replaceAll("\r", "\\r")}"`;
  }
  // Bare: one line, no comment sign, nothing trim() removes, no opening quote.
  if (/^[^\s'"`#][^\r\n\u2028\u2029#]*$/.test(value) && !/\s$/.test(value))
    return `${name}=${text}`;
  return undefined;
}

/** Starts a child in its own process group, so that stopping it stops its children too. */
function startGroup(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  options: ServiceOptions,
): ChildProcess {
  const child = spawn(command, args, {
    cwd: root,
    env,
    detached: true,
    stdio: options.stdio ?? "inherit",
  });
  const kill = () => {
    try {
      if (child.pid) process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  };
  process.once("exit", kill);
  child.once("exit", () => process.off("exit", kill));
  return child;
}

function stopGroup(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null || !child.pid) return resolve();
    const pid = child.pid;
    const timer = setTimeout(() => {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {
        // already gone
      }
    }, 5000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    try {
      process.kill(-pid, "SIGTERM");
    } catch {
      resolve();
    }
  });
}

async function waitForHealth(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the service exited (code ${child.exitCode})`);
    try {
      const res = await fetch(`${url}/health`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the service did not answer ${url}/health within ${timeoutMs / 1000} s`);
}
