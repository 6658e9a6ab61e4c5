// npm run build (and npm's prepare): compiles the npm package to dist/lib: ES modules and their
// declarations, and the same modules as CommonJS in dist/lib/cjs for require().
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import ts from "typescript";

const root = join(import.meta.dirname, "..");
const CONFIG = join(root, "tsconfig.build.json");

/**
 * The sources import each other without extensions (`./errors`, `../redis`), which bundlers and
 * `moduleResolution: Bundler` accept but Node's ES modules, and TypeScript under `NodeNext`
 * reading our declarations, do not. tsc writes specifiers as they are written, so each emitted
 * relative specifier is pointed at the file tsc emitted for it: `./errors.js` or `./redis/index.js`
 * (a declaration's `.js` specifier finds the `.d.ts` beside it). One that matches no emitted file
 * stops the build rather than shipping an import that fails at run time.
 */
export function withExtensions(file: string, text: string): string {
  const ext = file.endsWith(".d.ts") ? ".d.ts" : ".js";
  // ts.preProcessFile is TypeScript's own scanner: it sees import/export ... from, import("…")
  // in types and side-effect imports, and skips strings and comments that only look like them.
  const found = ts.preProcessFile(text, true, true).importedFiles;
  let out = "";
  let done = 0;
  for (const { fileName: spec, pos } of found) {
    if (!spec.startsWith("./") && !spec.startsWith("../")) continue;
    // pos is the opening quote in TypeScript 5.9; accept the literal's first character as well.
    const start = text.startsWith(spec, pos + 1) ? pos + 1 : text.startsWith(spec, pos) ? pos : -1;
    if (start < 0) throw new Error(`${relative(root, file)}: cannot locate the import "${spec}"`);
    const target = resolve(dirname(file), spec);
    let fixed: string;
    if (spec.endsWith(".js") && existsSync(`${target.slice(0, -3)}${ext}`)) fixed = spec;
    else if (existsSync(`${target}${ext}`)) fixed = `${spec}.js`;
    else if (existsSync(join(target, `index${ext}`))) fixed = `${spec}/index.js`;
    else {
      throw new Error(
        `${relative(root, file)}: the import "${spec}" matches no emitted file (${ext}); ` +
          "only modules under src/ can be imported by relative path",
      );
    }
    out += text.slice(done, start) + fixed;
    done = start + spec.length;
  }
  return out + text.slice(done);
}

/** Where the CommonJS modules go, inside the outDir: the package's `require` condition. */
export const CJS_DIR = "cjs";

/**
 * The CommonJS twin of one emitted ES module, for `require()` (Node 20 before 20.19 cannot
 * require an ES module, nor can Jest's default runtime). TypeScript's own per-file transpiler on
 * the finished ES module (its specifiers already end in `.js`), so the two builds differ in their
 * module syntax only. One file each, not one bundle an entry: `delayq/tcp` throws the
 * `DelayqError` that `require("delayq")` exports, as the ES modules do. A program that both
 * imports and requires delayq gets two copies, as with any dual package.
 */
export function toCommonJs(file: string, text: string): string {
  const { outputText, diagnostics } = ts.transpileModule(text, {
    fileName: file,
    reportDiagnostics: true,
    compilerOptions: {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      removeComments: false,
      verbatimModuleSyntax: false,
    },
  });
  if (diagnostics && diagnostics.length > 0) throw new Error(format(diagnostics));
  return outputText;
}

/** Compiles tsconfig.build.json's entries into its outDir, from scratch; returns the files. */
export function buildPackage(): string[] {
  const read = ts.readConfigFile(CONFIG, ts.sys.readFile);
  if (read.error) throw new Error(format([read.error]));
  const config = ts.parseJsonConfigFileContent(read.config, ts.sys, root, undefined, CONFIG);
  if (config.errors.length > 0) throw new Error(format(config.errors));
  const outDir = config.options.outDir;
  if (!outDir?.startsWith(join(root, "dist"))) throw new Error(`unexpected outDir ${outDir}`);

  const host = ts.createCompilerHost(config.options);
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options, host });
  const problems = ts.getPreEmitDiagnostics(program);
  if (problems.length > 0) throw new Error(format(problems));

  // Built from scratch beside the old one, then swapped in: a module deleted from src/ does not
  // linger in the package, and a process importing dist/lib meanwhile (the examples' tests) never
  // finds it half written.
  const fresh = `${outDir}.${process.pid}.tmp`;
  const stale = `${outDir}.${process.pid}.old`;
  rmSync(fresh, { recursive: true, force: true });
  const written: string[] = [];
  const emitted = program.emit(undefined, (file, text, bom, onError, sources, data) => {
    const target = join(fresh, relative(outDir, file));
    host.writeFile(target, text, bom, onError, sources, data);
    written.push(target);
  });
  if (emitted.diagnostics.length > 0) throw new Error(format(emitted.diagnostics));
  // After the whole emit, so that every specifier's target is already on disk.
  for (const file of written) writeFileSync(file, withExtensions(file, readFileSync(file, "utf8")));
  // The CommonJS tree: each module transpiled, each declaration copied (a declaration under a
  // "type": "commonjs" package.json describes a CommonJS module to TypeScript, as it must for a
  // `require`), so the `require` condition has types of the right kind.
  const cjs = join(fresh, CJS_DIR);
  for (const file of [...written]) {
    const target = join(cjs, relative(fresh, file));
    const text = readFileSync(file, "utf8");
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, file.endsWith(".d.ts") ? text : toCommonJs(file, text));
    written.push(target);
  }
  const marker = join(cjs, "package.json");
  writeFileSync(marker, `${JSON.stringify({ type: "commonjs" })}\n`);
  written.push(marker);
  if (existsSync(outDir)) renameSync(outDir, stale);
  renameSync(fresh, outDir);
  rmSync(stale, { recursive: true, force: true });
  return written.map((file) => join(outDir, relative(fresh, file)));
}

function format(diagnostics: readonly ts.Diagnostic[]): string {
  return ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (name) => name,
    getCurrentDirectory: () => root,
    getNewLine: () => "\n",
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  try {
    const files = buildPackage();
    console.log(`build-package: ${files.length} files in dist/lib`);
  } catch (error) {
    console.error(`build-package: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  }
}
