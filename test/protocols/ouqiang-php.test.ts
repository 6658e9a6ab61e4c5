// ouqiang's own PHP client and a curl script from its README, unchanged, against a real service.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestService, type TestService } from "../support/service";

/**
 * Where ouqiang/delayqueue-php (MIT) is: a checkout, or a git directory to take it from. It is
 * not part of this repository; without it the PHP half is skipped, saying so.
 */
const CLIENT_SOURCE = process.env.OUQIANG_PHP_CLIENT ?? "/work/.mirror/ouqiang+delayqueue-php/repo";

const php = spawnSync("php", ["-r", 'echo extension_loaded("curl") ? "ok" : "no curl";'], {
  encoding: "utf8",
});
const phpMissing =
  php.error || php.stdout !== "ok"
    ? `php-cli with the curl extension is missing (${php.error?.message ?? php.stdout}): ` +
      "sudo apt-get install -y php-cli php-curl"
    : undefined;
const curlMissing = spawnSync("curl", ["--version"]).error ? "curl is missing" : undefined;

let service: TestService;
let workDir: string;

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), "delayq-ouqiang-"));
  service = await startTestService();
}, 60_000);

afterAll(async () => {
  await service?.stop();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

async function v1Job(id: string): Promise<{ state: string; attempts: number; body: unknown }> {
  const res = await fetch(`${service.url}/v1/jobs/${id}`, {
    headers: { authorization: `Bearer ${service.token}` },
  });
  return ((await res.json()) as { job: { state: string; attempts: number; body: unknown } }).job;
}

describe("ouqiang's PHP client (start-point/delayqueue-php)", () => {
  it("pushes, pops across topics, finishes through its handler, deletes", async (ctx) => {
    if (phpMissing) return ctx.skip(phpMissing);
    const clientDir = checkoutClient(CLIENT_SOURCE, workDir);
    if (!clientDir) {
      return ctx.skip(
        `ouqiang's PHP client is not at ${CLIENT_SOURCE}; set OUQIANG_PHP_CLIENT to a checkout of ` +
          "github.com/ouqiang/delayqueue-php",
      );
    }
    // Its HTTP library (Guzzle 5) resolves "/push" against the host's root whatever path the
    // server URL has, so it is pointed at a proxy that maps / to /compat/ouqiang/<token>/, as
    // docs/clients.md tells its users to do with nginx.
    const proxy = await rootProxy(`${service.url}/compat/ouqiang/${service.token}`);
    try {
      const label = crypto.randomUUID().slice(0, 8);
      // Not spawnSync: the proxy lives in this process and must keep answering.
      const run = await runAsync(
        "php",
        [
          "-d",
          "error_reporting=E_ALL & ~E_DEPRECATED",
          join(import.meta.dirname, "ouqiang-php", "run.php"),
        ],
        { ...process.env, OUQIANG_PHP_CLIENT: clientDir, OUQIANG_SERVER: proxy.url, LABEL: label },
      );
      expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
      const report = JSON.parse(run.stdout.trim().split("\n").pop() as string);
      const body = { uid: 10829378, created: 1498657365, note: '订单 ✓ "quoted"' };

      expect(report.popped).toEqual({ className: "OrderHandler", id: `php-${label}-1`, body });
      // Pushed with a 2 s delay, it was not handed out before then.
      expect(report.waited).toBeGreaterThanOrEqual(1.9);
      expect(report.performed).toEqual([{ id: `php-${label}-1`, body }]);
      expect((await v1Job(`php-${label}-1`)).state).toBe("finished");

      expect(report.failedId).toBe(`php-${label}-2`);
      expect(report.logged).toEqual([
        "warning: Job execution failed the payment provider did not answer",
      ]);
      expect(await v1Job(`php-${label}-2`)).toMatchObject({ state: "reserved", attempts: 1 });

      expect((await v1Job(`php-${label}-3`)).state).toBe("deleted");
      expect(report.refused).toMatch(/topic/);
      expect(proxy.paths.every((path) => /^\/(push|pop|finish|delete)$/.test(path))).toBe(true);
      expect(proxy.paths).toContain("/finish");
    } finally {
      await proxy.close();
    }
  }, 90_000);
});

describe("a curl script written for ouqiang's HTTP API", () => {
  it("runs unchanged with the base URL set to /compat/ouqiang/{token}", async (ctx) => {
    if (curlMissing) return ctx.skip(curlMissing);
    // The requests of ouqiang's README, as a shell script would send them.
    const script = `set -eu
curl -s -X POST "$BASE/push" -d '{"topic":"order","id":"15702398321","delay":1,"ttr":120,"body":"{\\"uid\\": 10829378,\\"created\\": 1498657365 }"}'; echo
curl -s -X POST "$BASE/get" -d '{"id":"15702398321"}'; echo
curl -s -X POST "$BASE/pop" -d '{"topic":"order"}'; echo
curl -s -X POST "$BASE/finish" -d '{"id":"15702398321"}'; echo
curl -s -X POST "$BASE/get" -d '{"id":"15702398321"}'; echo
curl -s -X POST "$BASE/push" -d '{"topic":"order","id":"15702398322","delay":3600,"ttr":120,"body":"x"}'; echo
curl -s -X POST "$BASE/delete" -d '{"id":"15702398322"}'; echo
`;
    const started = Date.now();
    const run = spawnSync("bash", ["-c", script], {
      encoding: "utf8",
      timeout: 60_000,
      env: { ...process.env, BASE: `${service.url}/compat/ouqiang/${service.token}` },
    });
    expect(run.status, run.stderr).toBe(0);
    const answers = run.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    const body = '{"uid": 10829378,"created": 1498657365 }';
    const done = { code: 0, message: "操作成功", data: null };
    expect(answers).toEqual([
      { code: 0, message: "添加成功", data: null },
      {
        code: 0,
        message: "操作成功",
        data: {
          topic: "order",
          id: "15702398321",
          delay: expect.any(Number),
          ttr: 120,
          body,
          state: "delayed",
        },
      },
      {
        code: 0,
        message: "操作成功",
        data: { id: "15702398321", body, receipt: expect.any(String) },
      },
      done,
      done,
      { code: 0, message: "添加成功", data: null },
      done,
    ]);
    const due = answers[1].data.delay * 1000;
    expect(due).toBeGreaterThanOrEqual(Math.floor(started / 1000) * 1000 + 1000);
    expect((await v1Job("15702398321")).state).toBe("finished");
    expect((await v1Job("15702398322")).state).toBe("deleted");
  }, 60_000);
});

/** The client's src/ in a temporary directory: from a checkout, or exported from a git dir. */
function checkoutClient(source: string, into: string): string | undefined {
  if (existsSync(join(source, "src", "DelayQueue.php"))) return source;
  if (!existsSync(join(source, "HEAD")) && !existsSync(join(source, ".git"))) return undefined;
  const gitDir = existsSync(join(source, ".git")) ? join(source, ".git") : source;
  const dir = join(into, "delayqueue-php");
  const archive = spawnSync(
    "bash",
    [
      "-c",
      `mkdir -p "$2" && git --git-dir="$1" archive HEAD src LICENSE | tar -x -C "$2"`,
      "_",
      gitDir,
      dir,
    ],
    { encoding: "utf8" },
  );
  if (archive.status !== 0 || !existsSync(join(dir, "src", "DelayQueue.php"))) return undefined;
  return dir;
}

/** An HTTP proxy that serves `target` at its root: /push → <target>/push. */
async function rootProxy(
  target: string,
): Promise<{ url: string; paths: string[]; close(): Promise<void> }> {
  const paths: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      paths.push(req.url ?? "");
      const body = Buffer.concat(chunks);
      fetch(`${target}${req.url}`, {
        method: req.method,
        headers: { "content-type": req.headers["content-type"] ?? "application/json" },
        body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
      })
        .then(async (answer) => {
          res.writeHead(answer.status, { "content-type": "application/json" });
          res.end(Buffer.from(await answer.arrayBuffer()));
        })
        .catch((error: unknown) => {
          res.writeHead(502);
          res.end(String(error));
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    paths,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Runs a command to its end without blocking the event loop; kills it after 60 s. */
function runAsync(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8");
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}
