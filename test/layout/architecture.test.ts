// The layout a newcomer can follow (DESIGN §7), checked on the sources with the TypeScript
// parser: calls between modules go through imports, the Lua stays behind src/redis, and the
// rooms that do the work are made of functions short enough to read whole.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");

function sources(path: string): string[] {
  const full = join(root, path);
  if (!statSync(full).isDirectory()) return [path];
  return readdirSync(full).flatMap((entry) => sources(join(path, entry)));
}

function parse(path: string): ts.SourceFile {
  return ts.createSourceFile(path, readFileSync(join(root, path), "utf8"), ts.ScriptTarget.Latest);
}

/** Every function-like node with a body in `file`, with its name and its length in lines. */
function functionsOf(file: ts.SourceFile): { name: string; line: number; lines: number }[] {
  const out: { name: string; line: number; lines: number }[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
      const end = file.getLineAndCharacterOfPosition(node.getEnd()).line;
      const name = node.name && ts.isIdentifier(node.name) ? node.name.text : "(anonymous)";
      out.push({ name, line: start + 1, lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return out;
}

function importsOf(file: ts.SourceFile): string[] {
  return file.statements
    .filter(ts.isImportDeclaration)
    .map((statement) => (statement.moduleSpecifier as ts.StringLiteral).text);
}

const WORK_ROOMS = ["src/payments", "src/dispatch", "src/scheduler", "src/run", "src/service.ts"];

describe("the layout", () => {
  it("has no function over 100 lines where the work is done (payments, dispatch, scheduler, run, service)", () => {
    const long = WORK_ROOMS.flatMap(sources)
      .filter((path) => path.endsWith(".ts"))
      .flatMap((path) =>
        functionsOf(parse(path))
          .filter((fn) => fn.lines > 100)
          .map((fn) => `${path}:${fn.line} ${fn.name} (${fn.lines} lines)`),
      );
    expect(long).toEqual([]);
  });

  it("keeps the Lua behind src/redis: no module outside it imports src/redis/lua", () => {
    const reaching = sources("src")
      .filter((path) => path.endsWith(".ts") && !path.startsWith(join("src", "redis")))
      .flatMap((path) =>
        importsOf(parse(path))
          .filter((specifier) => /(^|\/)redis\/lua(\/|$)/.test(specifier))
          .map((specifier) => `${path} imports ${specifier}`),
      );
    expect(reaching).toEqual([]);
  });

  it("wires the service by construction: no module filled in after it is built (no late-bound let, no cast to a module's type)", () => {
    const text = readFileSync(join(root, "src", "service.ts"), "utf8");
    // A `let` of a module built later and a cast of it where it is used: what a reader (or an
    // import-based tool) cannot follow.
    expect(text).not.toMatch(/\blet\s+\w+\s*:\s*\w+\s*\|\s*undefined/);
    expect(text).not.toMatch(/\bas\s+(Payments|Dispatcher|DelayQueue|Scheduler)\b/);
    // The entry points hand the platform's objects down as they are: no `as never`.
    for (const entry of ["functions/worker.ts", "functions/node.ts"]) {
      expect(readFileSync(join(root, entry), "utf8"), entry).not.toMatch(/\bas never\b/);
    }
  });

  it("types the Worker entry to the platform (ExportedHandler from @cloudflare/workers-types)", () => {
    const worker = parse("functions/worker.ts");
    expect(importsOf(worker)).toContain("@cloudflare/workers-types");
    const text = readFileSync(join(root, "functions", "worker.ts"), "utf8");
    expect(text).toMatch(/\}\s*satisfies ExportedHandler<Env>;/);
    expect(text).not.toMatch(/type ScheduledController\s*=/);
  });

  it("finds what it checks (the sources it walks are there)", () => {
    const walked = WORK_ROOMS.flatMap(sources).map((path) => relative(".", path));
    expect(walked).toContain(join("src", "dispatch", "loop.ts"));
    expect(walked.length).toBeGreaterThan(20);
  });
});
