// The README's Walkthrough and docs/clients.md's ouqiang block, run as a person would: a fresh
// `npm run dev` (the service on Node, see below) in a temporary DQ_DEV_DIR on a free port, each
// shell line pasted into one bash in turn, and every answer they show checked against what bash
// printed.
//
// `npm run dev -- --node` by default: it starts in half the time, and wrangler dev reloads the
// worker whenever a source file changes, which in a checkout others are editing cuts requests
// off at random. DELAYQ_WALKTHROUGH_MODE=wrangler runs the same walkthrough under wrangler dev.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../dev/redis-server";
import {
  answerMismatch,
  answerPattern,
  documentedSteps,
  onlyReads,
  type PlacedStep,
  walkthroughSteps,
} from "./walkthrough";

const root = join(import.meta.dirname, "..", "..");
const steps = documentedSteps((file) => readFileSync(join(root, file), "utf8"));
const mode = process.env.DELAYQ_WALKTHROUGH_MODE === "wrangler" ? "wrangler" : "node";

/** The ports the README uses: the API's default and its receiver's. */
const README_API_PORT = 8787;
const README_RECEIVER_PORT = 8790;
/** How long a step may wait for output that comes in the background (a push delivery). */
const BACKGROUND_MS = 15_000;
/** How long a read may be repeated while what it shows is on its way. */
const REREAD_MS = 10_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether any process of the group led by `pid` is alive. */
function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** One bash, fed lines as a person pastes them; its stdout and stderr read as one stream. */
class Shell {
  readonly child: ChildProcess;
  private output = "";
  private count = 0;

  constructor(cwd: string) {
    this.child = spawn("bash", ["--noprofile", "--norc"], {
      cwd,
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: process.env.HOME ?? cwd,
        LANG: "C.UTF-8",
      },
    });
    this.child.stdout?.on("data", (chunk: Buffer) => (this.output += chunk.toString()));
    this.child.stderr?.on("data", (chunk: Buffer) => (this.output += chunk.toString()));
    this.child.stdin?.write("exec 2>&1\n");
  }

  /** Runs a command to its end; answers where its output starts in the stream. */
  async run(command: string, timeoutMs = 30_000): Promise<number> {
    const mark = `__walkthrough_${this.count++}__`;
    const start = this.output.length;
    // A curl answer has no final newline: the mark goes on a line of its own after it.
    this.child.stdin?.write(`${command}\nprintf '\\n%s\\n' '${mark}'\n`);
    const deadline = Date.now() + timeoutMs;
    while (!this.output.includes(`\n${mark}\n`, start)) {
      if (this.child.exitCode !== null) throw new Error(`bash exited: ${this.since(start)}`);
      if (Date.now() > deadline)
        throw new Error(`no end after ${timeoutMs} ms: ${this.since(start)}`);
      await sleep(20);
    }
    return start;
  }

  /** The non-empty lines printed since `start` (the commands' and anything in the background). */
  linesSince(start: number): string[] {
    return this.since(start)
      .split("\n")
      .filter((line) => line.trim() !== "" && !/^__walkthrough_\d+__$/.test(line));
  }

  private since(start: number): string {
    return this.output.slice(start);
  }
}

let dir: string;
let apiPort: number;
let receiverPort: number;
let stack: ChildProcess;
let stackOutput = "";
let shell: Shell;
let failed: string | undefined;

/** The README's text with its ports replaced by this run's. */
function localize(text: string): string {
  return text
    .replace(new RegExp(`\\b${README_API_PORT}\\b`, "g"), String(apiPort))
    .replace(new RegExp(`\\b${README_RECEIVER_PORT}\\b`, "g"), String(receiverPort));
}

describe("reading the walkthrough", () => {
  it("finds the walkthrough's commands and answers in README.md and docs/clients.md", () => {
    expect(steps.length).toBeGreaterThanOrEqual(30);
    expect(steps.filter((step) => step.expected.length > 0).length).toBeGreaterThanOrEqual(25);
    const commands = steps.map((step) => step.command).join("\n");
    // What the walkthrough promises to show (issue 8 point 20, issue 11).
    for (const piece of [
      /"delay":2\b/, // a job due in 2 s
      /\/pop .*"wait":\d+/, // popped with wait
      /\/finish .*\$RECEIPT/, // finished with the captured receipt
      /\/release .*\$RECEIPT.*\\"delay\\"/, // released with a delay
      /\/bury /,
      /\/kick /,
      /state=dead/,
      /curl -s \$API\/v1\/topics -H/, // the topics list
      /\/v1\/command .*"command":"add"/,
      /"push":\{"url":"http:\/\/127\.0\.0\.1:8790\/hooks","via":"direct"\}/,
      /node -e .*listen\(8790/, // the local receiver
      /__sandbox\/trades -d .*"outTradeNo"/, // a trade created in the sandbox
      /\/v1\/payments .*"schedule":\[2\].*"notify":\["shop-hooks"\]/,
      /__sandbox\/trades\/order-1042\/pay/,
      /^BASE=http:\/\/127\.0\.0\.1:8787\/compat\/ouqiang\/dev-token$/m, // the ouqiang block
      /\$BASE\/pop -d '\{"topic":"order,sms"\}'/,
    ]) {
      expect(commands).toMatch(piece);
    }
    // The receiver is seen getting the payment's outcome.
    expect(steps.flatMap((step) => step.expected).join("\n")).toMatch(
      /^receiver: \/hooks signed .*"event":"payment\.paid"/m,
    );
  });

  it("reads commands, their answers and prose apart", () => {
    const markdown = [
      "## Walkthrough",
      "```sh",
      "# prose before a command",
      "echo one",
      "# one",
      "true",
      "",
      "# prose after a blank line",
      "echo a \\",
      "  b",
      "# a b",
      "```",
      "```js",
      "not(a, step)",
      "```",
      "## Next",
      "```sh",
      "echo outside",
      "```",
    ].join("\n");
    expect(walkthroughSteps(markdown, ["## Walkthrough"])).toEqual([
      { command: "echo one", expected: ["one"], line: 4 },
      { command: "true", expected: [], line: 6 },
      { command: "echo a \\\n  b", expected: ["a b"], line: 9 },
    ]);
    expect(() => walkthroughSteps("# delayq\n## Setup\n")).toThrow(/no "## Walkthrough"/);
  });

  it("matches placeholders by their shape and everything else exactly", () => {
    expect(
      answerPattern('{"dueAt":<ms>,"receipt":"<receipt>"}').test(
        '{"dueAt":1795449873373,"receipt":"3360cd56c93c.0"}',
      ),
    ).toBe(true);
    expect(answerPattern('{"dueAt":<ms>}').test('{"dueAt":"soon"}')).toBe(false);
    expect(answerPattern('{"polls":<n>}').test('{"polls":-1}')).toBe(false);
    expect(answerPattern('{"id":"pay:<id>:1"}').test('{"id":"pay:j5mpr464:1"}')).toBe(true);
    expect(answerPattern('{"a":1,…,"c":3}').test('{"a":1,"b":2,"c":3}')).toBe(true);
    expect(answerPattern('{"a":1,…,"c":3}').test('{"a":1,"b":2,"c":4}')).toBe(false);
    expect(answerPattern('{"state":"ready"}').test('{"state":"ready"} ')).toBe(false);
    expect(answerPattern("a.b").test("axb")).toBe(false);
    expect(answerMismatch(["x"], ["x"])).toBeUndefined();
    expect(answerMismatch(["x"], [])).toMatch(/did not print: x/);
    expect(answerMismatch([], ["y"])).toMatch(/do not show: y/);
    expect(answerMismatch(['{"kicked":1}'], ['{"kicked":0}'])).toMatch(/line 1 differs/);
  });

  it("asks again only commands that just read", () => {
    expect(onlyReads('curl -s $API/v1/jobs/hook-1 -H "$AUTH"')).toBe(true);
    expect(onlyReads('curl -s "$API/v1/topics/emails/jobs?state=dead" -H "$AUTH"')).toBe(true);
    expect(onlyReads("curl -s $API/v1/topics/emails/pop -H \"$AUTH\" -d '{}'")).toBe(false);
    expect(onlyReads('curl -s -X DELETE $API/v1/jobs/reminder-1 -H "$AUTH"')).toBe(false);
    expect(onlyReads("curl -s -X POST $WXPAY/__sandbox/trades/order-1042/pay")).toBe(false);
    expect(onlyReads('OUT=$(curl -s $API/v1/topics -H "$AUTH"); echo "$OUT"')).toBe(false);
  });
});

describe(`the walkthrough against npm run dev${mode === "node" ? " -- --node" : ""}`, () => {
  beforeAll(async () => {
    execFileSync("bash", ["-c", "command -v curl"], { stdio: "ignore" });
    dir = mkdtempSync(join(tmpdir(), "delayq-walkthrough-"));
    // The walkthrough reads ./.dev/stack.json: the shell runs where that is the stack's folder.
    const devDir = join(dir, ".dev");
    mkdirSync(devDir);
    [apiPort, receiverPort] = await Promise.all([freePort(), freePort()]);
    // A fresh stack with the defaults a person has: no DQ_* of the test run's own.
    const env: NodeJS.ProcessEnv = {};
    for (const [name, value] of Object.entries(process.env)) {
      if (!name.startsWith("DQ_") && !["PORT", "BRIDGE_PORT", "REDIS_URL"].includes(name))
        env[name] = value;
    }
    const args = ["run", "dev", ...(mode === "node" ? ["--", "--node"] : [])];
    stack = spawn("npm", args, {
      cwd: root,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...env, PORT: String(apiPort), DQ_DEV_DIR: devDir },
    });
    stack.stdout?.on("data", (chunk: Buffer) => (stackOutput += chunk));
    stack.stderr?.on("data", (chunk: Buffer) => (stackOutput += chunk));
    const file = join(devDir, "stack.json");
    const deadline = Date.now() + 90_000;
    while (!existsSync(file)) {
      if (stack.exitCode !== null) throw new Error(`npm run dev exited: ${stackOutput}`);
      if (Date.now() > deadline) throw new Error(`npm run dev did not come up: ${stackOutput}`);
      await sleep(100);
    }
    shell = new Shell(dir);
  }, 120_000);

  afterAll(async () => {
    if (shell?.child.pid && groupAlive(shell.child.pid)) process.kill(-shell.child.pid, "SIGKILL");
    if (stack?.pid && groupAlive(stack.pid)) {
      process.kill(-stack.pid, "SIGINT");
      const deadline = Date.now() + 15_000;
      while (groupAlive(stack.pid) && Date.now() < deadline) await sleep(100);
      if (groupAlive(stack.pid)) process.kill(-stack.pid, "SIGKILL");
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  /** Runs one step; answers why its output is not the one shown, if it is not. */
  async function runStep(step: PlacedStep): Promise<string | undefined> {
    const command = localize(step.command);
    const expected = step.expected.map(localize);
    const started = Date.now();
    let start = await shell.run(command);
    for (;;) {
      const actual = shell.linesSince(start);
      const mismatch = answerMismatch(expected, actual);
      if (mismatch === undefined) return undefined;
      const waited = Date.now() - started;
      if (onlyReads(step.command) && waited < REREAD_MS) {
        await sleep(300);
        start = await shell.run(command);
      } else if (actual.length < expected.length && waited < BACKGROUND_MS) {
        await sleep(100); // a line printed in the background (the receiver) may be on its way
      } else {
        return mismatch;
      }
    }
  }

  for (const step of steps) {
    const where = `${step.file}:${step.line}`;
    const title = `${where}: ${step.command.split("\n")[0]?.slice(0, 90)}`;
    it(title, async (context) => {
      if (failed !== undefined) context.skip(`an earlier step failed (${failed})`);
      const mismatch = await runStep(step);
      if (mismatch !== undefined) {
        failed = where;
        expect.fail(`${where}: ${step.command}\n${mismatch}`);
      }
    }, 60_000);
  }
});
