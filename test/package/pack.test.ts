// The npm package as a user gets it: npm pack, installed into a new project, run by plain Node
// (import and require), bundled, type-checked; and what installing it pulls in.
import { execFile } from "node:child_process";
import { createHmac } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { build } from "esbuild";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startTestService, type TestService } from "../support/service";

const root = join(import.meta.dirname, "..", "..");
const work = mkdtempSync(join(tmpdir(), "delayq-pack-"));
/**
 * A project that depends on the tarball and on both Redis clients delayq can drive (the optional
 * peers a user picks from), installed by npm from its cache.
 */
const consumer = join(work, "consumer");
/** A project that depends on the tarball alone: what `npm install delayq` gives. */
const alone = join(work, "alone");
/** The tarball unpacked where no dependency can be found: what the client may import at most. */
const bare = join(work, "bare");
let tarball = "";

type Manifest = {
  private?: boolean;
  license?: string;
  exports: Record<string, unknown>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
};
type LockEntry = { version?: string; dev?: boolean; devOptional?: boolean; peer?: boolean };

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

/** Like {@link node}, on a CommonJS script: `require()` as a CommonJS user calls it. */
function nodeCommonJs(cwd: string, source: string, env: Record<string, string> = {}): Promise<Run> {
  const plain = { PATH: process.env.PATH, HOME: process.env.HOME, ...env };
  return run(process.execPath, ["--input-type=commonjs", "-e", source], cwd, plain);
}

/**
 * Installs a project depending on `dependencies` with npm, offline. Its lockfile offers every
 * package of the checkout's package-lock.json (so npm takes them from its cache, at the
 * checkout's versions), and npm keeps only those the dependencies need: what it installs is
 * what the package's own manifest asks for, as for a user.
 */
async function installProject(dir: string, dependencies: Record<string, string>): Promise<void> {
  mkdirSync(dir);
  const lock = JSON.parse(await readFile(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, LockEntry>;
  };
  const name = relative(work, dir);
  const packages: Record<string, unknown> = { "": { name, dependencies } };
  for (const [path, { dev, devOptional, peer, ...entry }] of Object.entries(lock.packages)) {
    if (path !== "") packages[path] = entry;
  }
  const manifest = { name, private: true, type: "module", dependencies };
  await writeFile(join(dir, "package.json"), JSON.stringify(manifest, null, 2));
  await writeFile(
    join(dir, "package-lock.json"),
    JSON.stringify({ name, lockfileVersion: 3, requires: true, packages }, null, 2),
  );
  await succeed("npm", ["install", "--offline", "--no-audit", "--no-fund"], dir);
}

/** The packages installed at the top of a project's node_modules (scoped ones as @scope/name). */
function installed(dir: string): string[] {
  const top = join(dir, "node_modules");
  return readdirSync(top)
    .filter((name) => !name.startsWith("."))
    .flatMap((name) =>
      name.startsWith("@") ? readdirSync(join(top, name)).map((sub) => `${name}/${sub}`) : [name],
    )
    .sort();
}

/** Every file under `dir`, relative to it, sorted. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
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

  // The user who picked a Redis client installs it beside delayq (both here, as the tests use
  // both), at the checkout's versions.
  const lock = JSON.parse(await readFile(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, LockEntry>;
  };
  const locked = (name: string) => lock.packages[`node_modules/${name}`]?.version ?? "missing";
  // The three projects at once: each npm install mostly waits on its cache and the disk.
  mkdirSync(join(bare, "node_modules", "delayq"), { recursive: true });
  await Promise.all([
    installProject(consumer, {
      delayq: `file:${tarball}`,
      ioredis: locked("ioredis"),
      "@upstash/redis": locked("@upstash/redis"),
    }),
    installProject(alone, { delayq: `file:${tarball}` }),
    succeed(
      "tar",
      ["-xzf", tarball, "-C", join(bare, "node_modules", "delayq"), "--strip-components=1"],
      work,
    ),
  ]);
}, 180_000);

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe("npm pack", () => {
  /** The installed package's manifest, as npm packed it. */
  const manifest = async () =>
    JSON.parse(
      await readFile(join(consumer, "node_modules", "delayq", "package.json"), "utf8"),
    ) as Manifest;

  it("packs the built modules (ES and CommonJS), their declarations, package.json, the README and the license, and no sources", async () => {
    const listed = await succeed("tar", ["-tzf", tarball], work);
    const files = listed.stdout.trim().split("\n").sort();
    expect(files).toContain("package/package.json");
    expect(files).toContain("package/README.md");
    expect(files).toContain("package/LICENSE");
    expect(files).toContain("package/dist/lib/cjs/package.json");
    for (const entry of ["index", "client/index", "client/node", "redis/tcp"]) {
      for (const tree of ["dist/lib", "dist/lib/cjs"]) {
        expect(files).toContain(`package/${tree}/${entry}.js`);
        expect(files).toContain(`package/${tree}/${entry}.d.ts`);
      }
    }
    const stray = files.filter(
      (file) =>
        !/^package\/(package\.json|README\.md|LICENSE|dist\/lib\/cjs\/package\.json|dist\/lib\/.+\.(js|d\.ts))$/.test(
          file,
        ),
    );
    expect(stray).toEqual([]);
    // The CommonJS tree is the ES one again, module for module.
    const lib = join(bare, "node_modules", "delayq", "dist", "lib");
    const esm = filesUnder(lib).filter((file) => !file.startsWith("cjs/"));
    const cjs = filesUnder(join(lib, "cjs")).filter((file) => file !== "package.json");
    expect(cjs).toEqual(esm);
    const { private: hidden, license, exports } = await manifest();
    expect(hidden).toBeUndefined();
    expect(license).toBe("MIT");
    expect(Object.keys(exports)).toEqual([
      ".",
      "./client",
      "./client/node",
      "./tcp",
      "./package.json",
    ]);
  });

  it("depends on zod alone; ioredis and @upstash/redis are optional peers", async () => {
    const { dependencies, peerDependencies, peerDependenciesMeta } = await manifest();
    expect(Object.keys(dependencies ?? {})).toEqual(["zod"]);
    expect(Object.keys(peerDependencies ?? {}).sort()).toEqual(["@upstash/redis", "ioredis"]);
    expect(peerDependenciesMeta).toEqual({
      "@upstash/redis": { optional: true },
      ioredis: { optional: true },
    });
  });

  it("npm install of the package alone installs delayq and zod, nothing else", () => {
    expect(installed(alone)).toEqual(["delayq", "zod"]);
    expect(readdirSync(join(alone, "node_modules", "delayq"))).not.toContain("node_modules");
    // The user who picks ioredis and @upstash/redis gets them and their own dependencies.
    expect(installed(consumer)).toEqual(expect.arrayContaining(["@upstash/redis", "ioredis"]));
  });

  it("imports at run time and in its declarations only node's modules, zod and the peers", async () => {
    const lib = join(bare, "node_modules", "delayq", "dist", "lib");
    const { dependencies, peerDependencies } = await manifest();
    const declared = new Set([
      ...Object.keys(dependencies ?? {}),
      ...Object.keys(peerDependencies ?? {}),
    ]);
    const builtins = new Set(builtinModules);
    const undeclared: string[] = [];
    const used = new Set<string>();
    for (const file of filesUnder(lib).filter((name) => /\.(js|d\.ts)$/.test(name))) {
      const text = await readFile(join(lib, file), "utf8");
      // TypeScript's own scanner: import/export ... from, import("…"), require("…").
      const { importedFiles } = ts.preProcessFile(text, true, true);
      const required = [...text.matchAll(/\brequire\("([^"]+)"\)/g)].map((match) => match[1] ?? "");
      for (const spec of [...importedFiles.map(({ fileName }) => fileName), ...required]) {
        if (spec.startsWith(".")) continue;
        const name = spec.startsWith("@")
          ? spec.split("/").slice(0, 2).join("/")
          : spec.split("/")[0];
        if (spec.startsWith("node:") || builtins.has(spec)) continue;
        used.add(name ?? spec);
        if (!declared.has(name ?? spec)) undeclared.push(`${file}: ${spec}`);
      }
    }
    expect(undeclared).toEqual([]);
    expect([...used].sort()).toEqual(["ioredis", "zod"]);
  });
});

/** How a user's program loads the package: as an ES module (`import`) or CommonJS (`require`). */
type Loading = "import" | "require";

/**
 * A program that loads `modules` (specifier → the names it takes) the way `loading` says, then
 * runs `body` (which may await) and prints its last line.
 */
function program(loading: Loading, modules: Record<string, string[]>, body: string): string {
  const entries = Object.entries(modules);
  if (loading === "import") {
    const lines = entries.map(([spec, names]) => `import { ${names.join(", ")} } from "${spec}";`);
    return `${lines.join("\n")}\n${body}`;
  }
  const lines = entries.map(
    ([spec, names]) => `const { ${names.join(", ")} } = require("${spec}");`,
  );
  return `${lines.join("\n")}\n(async () => {\n${body}\n})().catch((error) => { console.error(error); process.exit(1); });`;
}

/** Plain Node on {@link program}'s text. */
function runProgram(
  loading: Loading,
  cwd: string,
  modules: Record<string, string[]>,
  body: string,
  env: Record<string, string> = {},
): Promise<Run> {
  const source = program(loading, modules, body);
  return loading === "import" ? node(cwd, source, env) : nodeCommonJs(cwd, source, env);
}

describe("plain Node imports and requires the installed package", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startTestService();
  });
  afterAll(async () => {
    await service?.stop();
  });

  it.each<Loading>(["import", "require"])(
    "delayq/client talks to a real service and checks signatures (%s)",
    async (loading) => {
      const secret = "whsec_pack_test_0123456789";
      const id = `pack-${loading}`;
      const raw = JSON.stringify({ id, topic: "pack", body: { n: 1 } });
      const t = Math.floor(Date.now() / 1000);
      // Signed with node:crypto, not with delayq's code.
      const mac = createHmac("sha256", secret).update(`${t}.${raw}`, "utf8").digest("hex");
      const body = `
      const { DQ_URL, DQ_TOKEN, SECRET, RAW, HEADER, ID } = process.env;
      const dq = createClient({ baseUrl: DQ_URL, token: DQ_TOKEN, retries: 0 });
      const added = await dq.add({ topic: "pack", id: ID, body: { n: 1 } });
      const [job] = await dq.pop("pack", { count: 1 });
      await dq.finish(job.id, { receipt: job.receipt });
      const after = await dq.get(ID);
      let refused;
      try {
        await createClient({ baseUrl: DQ_URL, token: "not-a-token", retries: 0 }).get(ID);
      } catch (error) {
        refused = error instanceof DelayqClientError ? { code: error.code, status: error.status } : String(error);
      }
      console.log(JSON.stringify({
        created: added.created, popped: job.id, body: job.body, state: after.state, refused,
        header: SIGNATURE_HEADER,
        signed: await verifySignature(SECRET, HEADER, RAW),
        altered: await verifySignature(SECRET, HEADER, RAW + " "),
      }));`;
      const names = ["createClient", "DelayqClientError", "SIGNATURE_HEADER", "verifySignature"];
      const result = await runProgram(loading, consumer, { "delayq/client": names }, body, {
        DQ_URL: service.url,
        DQ_TOKEN: service.token,
        SECRET: secret,
        RAW: raw,
        HEADER: `t=${t},v1=${mac}`,
        ID: id,
      });
      expect(answer(result)).toEqual({
        created: true,
        popped: id,
        body: { n: 1 },
        state: "finished",
        refused: { code: "unauthorized", status: 401 },
        header: "delayq-signature",
        signed: true,
        altered: false,
      });
    },
  );

  it.each<Loading>(["import", "require"])(
    "delayq/client needs no other package at run time; delayq does (its dependencies) (%s)",
    async (loading) => {
      const client = await runProgram(
        loading,
        bare,
        {
          "delayq/client": ["createClient", "verifySignature"],
          "delayq/client/node": ["nodeFetch"],
        },
        `const dq = createClient({ baseUrl: "http://127.0.0.1:9", token: "t" });
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
      const library = await runProgram(
        loading,
        bare,
        { delayq: ["DelayQueue"] },
        "console.log(typeof DelayQueue);",
      );
      expect(library.code).not.toBe(0);
      expect(library.stderr).toMatch(/Cannot find (package|module) 'zod'/);
    },
  );

  it.each<Loading>(["import", "require"])(
    "without the optional peers, delayq loads; delayq/tcp asks for ioredis (%s)",
    async (loading) => {
      const library = await runProgram(
        loading,
        alone,
        { delayq: ["DelayQueue", "DelayqError"] },
        `console.log(JSON.stringify({ queue: typeof DelayQueue, error: new DelayqError("job_not_found", "x").code }));`,
      );
      expect(answer(library)).toEqual({ queue: "function", error: "job_not_found" });
      const tcp = await runProgram(
        loading,
        alone,
        { "delayq/tcp": ["connectRedis"] },
        "console.log(typeof connectRedis);",
      );
      expect(tcp.code).not.toBe(0);
      expect(tcp.stderr).toMatch(/Cannot find (package|module) 'ioredis'/);
    },
  );

  it.each<Loading>(["import", "require"])(
    "delayq's DelayQueue runs over delayq/tcp and over @upstash/redis, one DelayqError class (%s)",
    async (loading) => {
      const label = crypto.randomUUID().slice(0, 8);
      const body = `
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
      const modules = {
        "@upstash/redis": ["Redis"],
        delayq: ["DelayQueue", "DelayqError", "REDIS_CLIENT_OPTIONS"],
        "delayq/tcp": ["connectRedis"],
      };
      const result = await runProgram(loading, consumer, modules, body, {
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
    },
  );
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
  beforeAll(async () => {
    for (const source of ["check.ts", "check.cts"]) await writeFile(join(consumer, source), check);
  });

  // Three tsc processes (about 11 s each), side by side: each has its own tsconfig file.
  it.concurrent.each([
    ["NodeNext", "check.ts", { module: "NodeNext", moduleResolution: "NodeNext" }, "dist/lib"],
    ["Bundler", "check.ts", { module: "ESNext", moduleResolution: "Bundler" }, "dist/lib"],
    // A CommonJS file: its imports are require()s, which take the package's CommonJS build.
    ["NodeNext", "check.cts", { module: "NodeNext", moduleResolution: "NodeNext" }, "dist/lib/cjs"],
  ])(
    "with moduleResolution %s (%s)",
    async (name, source, resolution, tree) => {
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
        files: [source],
      };
      const file = `tsconfig.${name.toLowerCase()}.${source.replace(".", "-")}.json`;
      await writeFile(join(consumer, file), JSON.stringify(config, null, 2));
      const result = await run(process.execPath, [typescript, "-p", file, "--listFiles"], consumer);
      // --listFiles names every file read, each an absolute path; anything else is a diagnostic.
      const lines = `${result.stdout}${result.stderr}`.split("\n").filter(Boolean);
      expect(lines.filter((line) => !line.startsWith("/"))).toEqual([]);
      expect(result.code).toBe(0);
      const read = lines
        .filter((line) => line.includes("/node_modules/delayq/"))
        .map((line) => line.slice(line.indexOf("/node_modules/delayq/") + 21));
      expect(read).toContain(`${tree}/client/index.d.ts`);
      const other = tree === "dist/lib" ? "dist/lib/cjs/" : "dist/lib/";
      expect(read.filter((path) => path.startsWith(other) && !path.startsWith(`${tree}/`))).toEqual(
        [],
      );
    },
    120_000,
  );
});

describe("a bundler (esbuild) takes the installed package", () => {
  async function bundle(contents: string, format: "esm" | "cjs" = "esm") {
    const result = await build({
      stdin: { contents, resolveDir: consumer, loader: "js" },
      absWorkingDir: consumer,
      bundle: true,
      format,
      platform: format === "esm" ? "browser" : "node",
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

  it("bundles require('delayq/client') from the CommonJS build", async () => {
    const inputs = await bundle(`module.exports = require("delayq/client").createClient;`, "cjs");
    expect(inputs).toContain("node_modules/delayq/dist/lib/cjs/client/index.js");
    expect(
      inputs.filter((input) => !input.startsWith("node_modules/delayq/dist/lib/cjs/")),
    ).toEqual(["<stdin>"]);
  });
});
