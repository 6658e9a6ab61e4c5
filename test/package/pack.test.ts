// The npm package as a user gets it: npm pack, installed into a new project, run by plain Node, bundled, type-checked.
import { execFile } from "node:child_process";
import { createHmac } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestService, type TestService } from "../support/service";

const root = join(import.meta.dirname, "..", "..");
const work = mkdtempSync(join(tmpdir(), "delayq-pack-"));
/** A project that depends on the tarball, its dependencies installed by npm from the cache. */
const consumer = join(work, "consumer");
/** The tarball unpacked where no dependency can be found: what the client may import at most. */
const bare = join(work, "bare");
let tarball = "";

type Run = { code: number; stdout: string; stderr: string };

/** Runs a command; resolves with its exit code and output (it never rejects on a failure). */
function run(
  command: string,
  args: string[],
  cwd: string,
  env: Record<string, string | undefined> = process.env,
): Promise<Run> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, env, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Like {@link run}, and fails with the command's output unless it exits 0. */
async function succeed(command: string, args: string[], cwd: string): Promise<Run> {
  const result = await run(command, args, cwd);
  if (result.code !== 0) {
    throw new Error(
      `${command} ${args.join(" ")} (in ${cwd}) exited ${result.code}:\n${result.stdout}\n${result.stderr}`,
    );
  }
  return result;
}

/**
 * Plain Node on an ES module given as text, with none of the test run's loaders (no tsx, no
 * NODE_OPTIONS): a bare specifier resolves from `cwd` exactly as in a user's project.
 */
function node(cwd: string, source: string, env: Record<string, string> = {}): Promise<Run> {
  const plain = { PATH: process.env.PATH, HOME: process.env.HOME, ...env };
  return run(process.execPath, ["--input-type=module", "-e", source], cwd, plain);
}

/** The last line of a script's output, as JSON; fails with the whole output otherwise. */
function answer(result: Run): unknown {
  const last = result.stdout.trim().split("\n").at(-1) ?? "";
  if (result.code !== 0 || !last.startsWith("{")) {
    throw new Error(`node exited ${result.code}:\n${result.stdout}\n${result.stderr}`);
  }
  return JSON.parse(last);
}

beforeAll(async () => {
  // npm pack on a copy of the package's sources: pack runs prepare, which rebuilds dist/lib, and
  // the checkout's own dist/lib is in use by other suites meanwhile (the examples import it).
  const source = join(work, "source");
  const needed = ["package.json", "tsconfig.json", "tsconfig.build.json", "src", "dev"];
  const extras = readdirSync(root).filter((name) => /^(readme|licen[cs]e|notice)/i.test(name));
  for (const name of [...needed, ...extras])
    cpSync(join(root, name), join(source, name), { recursive: true });
  symlinkSync(join(root, "node_modules"), join(source, "node_modules"), "dir");
  await succeed("npm", ["pack", "--pack-destination", work], source);
  const { version } = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as {
    version: string;
  };
  const packed = readdirSync(work).filter((name) => name.endsWith(".tgz"));
  expect(packed).toEqual([`delayq-${version}.tgz`]);
  tarball = join(work, packed[0] ?? "");

  // The consumer's lockfile pins the package's dependencies to the checkout's versions (the
  // entries of package-lock.json that are not dev-only), so npm installs them from its cache,
  // offline. A runtime dependency listed only under devDependencies would be missing here.
  mkdirSync(consumer);
  const lock = JSON.parse(await readFile(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, { dev?: boolean; devOptional?: boolean }>;
  };
  const dependencies = { delayq: `file:${tarball}` };
  const packages: Record<string, unknown> = { "": { name: "consumer", dependencies } };
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path !== "" && !entry.dev && !entry.devOptional) packages[path] = entry;
  }
  const manifest = { name: "consumer", private: true, type: "module", dependencies };
  await writeFile(join(consumer, "package.json"), JSON.stringify(manifest, null, 2));
  await writeFile(
    join(consumer, "package-lock.json"),
    JSON.stringify({ name: "consumer", lockfileVersion: 3, requires: true, packages }, null, 2),
  );
  await succeed("npm", ["install", "--offline", "--no-audit", "--no-fund"], consumer);

  mkdirSync(join(bare, "node_modules", "delayq"), { recursive: true });
  await succeed(
    "tar",
    ["-xzf", tarball, "-C", join(bare, "node_modules", "delayq"), "--strip-components=1"],
    work,
  );
}, 180_000);

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe("npm pack", () => {
  it("packs the built modules, their declarations, package.json, the README and the license, and no sources", async () => {
    const listed = await succeed("tar", ["-tzf", tarball], work);
    const files = listed.stdout.trim().split("\n").sort();
    expect(files).toContain("package/package.json");
    expect(files).toContain("package/README.md");
    expect(files).toContain("package/LICENSE");
    for (const entry of ["index", "client/index", "client/node", "redis/tcp"]) {
      expect(files).toContain(`package/dist/lib/${entry}.js`);
      expect(files).toContain(`package/dist/lib/${entry}.d.ts`);
    }
    const stray = files.filter(
      (file) =>
        !/^package\/(package\.json|README\.md|LICENSE|dist\/lib\/.+\.(js|d\.ts))$/.test(file),
    );
    expect(stray).toEqual([]);
    const manifest = JSON.parse(
      await readFile(join(consumer, "node_modules", "delayq", "package.json"), "utf8"),
    ) as { private?: boolean; license?: string; exports: Record<string, unknown> };
    expect(manifest.private).toBeUndefined();
    expect(manifest.license).toBe("MIT");
    expect(Object.keys(manifest.exports)).toEqual([
      ".",
      "./client",
      "./client/node",
      "./tcp",
      "./package.json",
    ]);
  });
});

describe("plain Node imports the installed package", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service?.stop();
  });

  it("delayq/client talks to a real service and checks signatures", async () => {
    const secret = "whsec_pack_test_0123456789";
    const raw = JSON.stringify({ id: "pack-1", topic: "pack", body: { n: 1 } });
    const t = Math.floor(Date.now() / 1000);
    // Signed with node:crypto, not with delayq's code.
    const mac = createHmac("sha256", secret).update(`${t}.${raw}`, "utf8").digest("hex");
    const script = `
      import { createClient, DelayqClientError, SIGNATURE_HEADER, verifySignature } from "delayq/client";
      const { DQ_URL, DQ_TOKEN, SECRET, RAW, HEADER } = process.env;
      const dq = createClient({ baseUrl: DQ_URL, token: DQ_TOKEN, retries: 0 });
      const added = await dq.add({ topic: "pack", id: "pack-1", body: { n: 1 } });
      const [job] = await dq.pop("pack", { count: 1 });
      await dq.finish(job.id, { receipt: job.receipt });
      const after = await dq.get("pack-1");
      let refused;
      try {
        await createClient({ baseUrl: DQ_URL, token: "not-a-token", retries: 0 }).get("pack-1");
      } catch (error) {
        refused = error instanceof DelayqClientError ? { code: error.code, status: error.status } : String(error);
      }
      console.log(JSON.stringify({
        created: added.created, popped: job.id, body: job.body, state: after.state, refused,
        header: SIGNATURE_HEADER,
        signed: await verifySignature(SECRET, HEADER, RAW),
        altered: await verifySignature(SECRET, HEADER, RAW + " "),
      }));`;
    const result = await node(consumer, script, {
      DQ_URL: service.url,
      DQ_TOKEN: service.token,
      SECRET: secret,
      RAW: raw,
      HEADER: `t=${t},v1=${mac}`,
    });
    expect(answer(result)).toEqual({
      created: true,
      popped: "pack-1",
      body: { n: 1 },
      state: "finished",
      refused: { code: "unauthorized", status: 401 },
      header: "delayq-signature",
      signed: true,
      altered: false,
    });
  });

  it("delayq/client needs no other package at run time; delayq does (its dependencies)", async () => {
    const client = await node(
      bare,
      `import { createClient, verifySignature } from "delayq/client";
       import { nodeFetch } from "delayq/client/node";
       const dq = createClient({ baseUrl: "http://127.0.0.1:9", token: "t" });
       const overHttp = createClient({ baseUrl: process.env.DQ_URL, token: process.env.DQ_TOKEN, fetch: nodeFetch() });
       const added = await overHttp.add({ topic: "pack-node", body: { n: 2 } });
       console.log(JSON.stringify({
         client: typeof dq.add, verify: await verifySignature("s", undefined, "x"),
         nodeFetch: (await overHttp.get(added.job.id)).body,
       }));`,
      { DQ_URL: service.url, DQ_TOKEN: service.token },
    );
    expect(answer(client)).toEqual({ client: "function", verify: false, nodeFetch: { n: 2 } });
    // The control: in the same place the library fails, for want of its dependencies.
    const library = await node(
      bare,
      `import { DelayQueue } from "delayq"; console.log(typeof DelayQueue);`,
    );
    expect(library.code).not.toBe(0);
    expect(library.stderr).toContain("ERR_MODULE_NOT_FOUND");
  });

  it("delayq's DelayQueue runs over delayq/tcp and over @upstash/redis, one DelayqError class", async () => {
    const label = crypto.randomUUID().slice(0, 8);
    const script = `
      import { Redis } from "@upstash/redis";
      import { DelayQueue, DelayqError, REDIS_CLIENT_OPTIONS } from "delayq";
      import { connectRedis } from "delayq/tcp";
      const { REDIS_URL, REST_URL, REST_TOKEN, PREFIX } = process.env;
      const tcp = connectRedis(REDIS_URL);
      const overTcp = new DelayQueue({ redis: tcp, prefix: PREFIX });
      const added = await overTcp.add({ topic: "lib", id: "lib-1", delay: 60, body: { n: 2 } });
      const rest = new Redis({ url: REST_URL, token: REST_TOKEN, ...REDIS_CLIENT_OPTIONS });
      const overRest = new DelayQueue({ redis: rest, prefix: PREFIX });
      const seen = await overRest.get("lib-1");
      await tcp.quit();
      let misconfigured;
      try {
        connectRedis("http://not-redis");
      } catch (error) {
        misconfigured = error instanceof DelayqError ? error.code : String(error);
      }
      let missing;
      try {
        await overRest.get("no-such-job");
      } catch (error) {
        missing = error instanceof DelayqError ? error.code : String(error);
      }
      console.log(JSON.stringify({
        created: added.created, state: seen.state, body: seen.body, misconfigured, missing,
      }));`;
    const result = await node(consumer, script, {
      REDIS_URL: `redis://127.0.0.1:${inject("redisPort")}`,
      REST_URL: inject("bridgeUrl"),
      REST_TOKEN: `${inject("bridgeToken")}:${label}`,
      PREFIX: `pack${label}`,
    });
    expect(answer(result)).toEqual({
      created: true,
      state: "delayed",
      body: { n: 2 },
      misconfigured: "internal_error",
      missing: "job_not_found",
    });
  });
});

describe("tsc type-checks a project that imports the package", () => {
  // Each @ts-expect-error must meet an error: were the package's types missing or `any` (an
  // import inside its declarations that does not resolve), tsc would report it unused.
  const check = `
import { DelayQueue, DelayqError, type ErrorCode, type Job } from "delayq";
import {
  createClient,
  type DelayqClient,
  DelayqClientError,
  type Job as ClientJob,
  SIGNATURE_HEADER,
  verifySignature,
} from "delayq/client";
import { nodeFetch } from "delayq/client/node";
import { connectRedis, type TcpRedis } from "delayq/tcp";

export async function use(url: string): Promise<string> {
  const redis: TcpRedis = connectRedis(url, { commandTimeoutMs: 1000 });
  const queue = new DelayQueue({ redis, prefix: "dq" });
  const { job }: { job: Job } = await queue.add({ topic: "t", delay: 5, body: { n: 1 } });
  const client: DelayqClient = createClient({
    baseUrl: "http://127.0.0.1:8787",
    token: "t",
    fetch: nodeFetch({ keepAliveMs: 1000 }),
  });
  const popped: ClientJob[] = await client.pop("t", { count: 10 });
  const ok: boolean = await verifySignature("secret", undefined, "raw");
  const code: ErrorCode = new DelayqError("job_not_found", "gone").code;
  const status: number = new DelayqClientError("unauthorized", "no", { status: 401 }).status;
  // @ts-expect-error pop takes a topic name
  await client.pop(42);
  // @ts-expect-error keepAliveMs is a number of ms
  nodeFetch({ keepAliveMs: "1s" });
  // @ts-expect-error connectRedis takes a URL
  connectRedis(6379);
  // @ts-expect-error a DelayQueue needs its Redis client
  new DelayQueue({ prefix: "dq" });
  // @ts-expect-error not an error code
  const wrong: ErrorCode = "no_such_code";
  return [job.id, popped.length, ok, code, status, SIGNATURE_HEADER, wrong].join();
}
`;
  const typescript = join(root, "node_modules", "typescript", "bin", "tsc");

  it.each([
    ["NodeNext", { module: "NodeNext", moduleResolution: "NodeNext" }],
    ["Bundler", { module: "ESNext", moduleResolution: "Bundler" }],
  ])(
    "with moduleResolution %s",
    async (name, resolution) => {
      await writeFile(join(consumer, "check.ts"), check);
      const config = {
        compilerOptions: {
          ...resolution,
          target: "ES2022",
          lib: ["ES2023"],
          strict: true,
          noEmit: true,
          // The package's declarations are checked too, not only what check.ts uses of them.
          skipLibCheck: false,
          types: ["node"],
          typeRoots: [join(root, "node_modules", "@types")],
        },
        files: ["check.ts"],
      };
      const file = `tsconfig.${name.toLowerCase()}.json`;
      await writeFile(join(consumer, file), JSON.stringify(config, null, 2));
      const result = await run(process.execPath, [typescript, "-p", file], consumer);
      expect(`${result.stdout}${result.stderr}`).toBe("");
      expect(result.code).toBe(0);
    },
    120_000,
  );
});

describe("a bundler (esbuild) takes the installed package", () => {
  async function bundle(contents: string) {
    const result = await build({
      stdin: { contents, resolveDir: consumer, loader: "js" },
      absWorkingDir: consumer,
      bundle: true,
      format: "esm",
      platform: "browser",
      write: false,
      metafile: true,
      logLevel: "silent",
    });
    return Object.keys(result.metafile.inputs);
  }

  it("bundles delayq/client for the browser or a Worker from its built files alone", async () => {
    const inputs = await bundle(`export { createClient, verifySignature } from "delayq/client";`);
    expect(inputs).toContain("node_modules/delayq/dist/lib/client/index.js");
    expect(inputs.filter((input) => !input.startsWith("node_modules/delayq/dist/lib/"))).toEqual([
      "<stdin>",
    ]);
  });

  it("bundles delayq (the library) with its dependencies", async () => {
    const inputs = await bundle(`export { DelayQueue, tick } from "delayq";`);
    expect(inputs).toContain("node_modules/delayq/dist/lib/index.js");
    expect(inputs.some((input) => input.startsWith("node_modules/zod/"))).toBe(true);
  });
});
