// Each script carries only the library helpers it calls. Redis runs a script's whole text on
// every call, so every helper defined is a closure or a table built again each time: the whole
// library cost ~20 µs a call on its own, more than an empty pop's three commands.

/** A top-level statement of the library: the names it defines and the words it mentions. */
type Statement = { text: string; defines: string[]; mentions: Set<string> };

const WORD = /[A-Za-z_][A-Za-z0-9_]*/g;

/**
 * The words of Lua code, comments left out (the library has no string holding `--` nor long
 * strings, so a comment starts at its first `--`).
 */
function words(lua: string): Set<string> {
  const code = lua.replace(/--\[(=*)\[[\s\S]*?\]\1\]/g, "").replace(/--.*$/gm, "");
  return new Set(code.match(WORD));
}

/** A line at column 0 that continues a statement rather than starting one. */
const CONTINUES = /^(end|else|elseif|until)\b|^[})\]]/;

/**
 * The library's top-level statements. The library is written so that a statement starts at
 * column 0 and everything that continues it is indented, or is the `end` or closing bracket
 * that ends it; comments at column 0 are dropped (they cost nothing, but this keeps the text
 * short).
 */
export function statementsOf(lib: string): Statement[] {
  const statements: string[][] = [];
  let blockComment = false;
  for (const line of lib.split("\n")) {
    if (blockComment) {
      if (line.includes("]]")) blockComment = false;
      continue;
    }
    if (/^--\[=*\[/.test(line)) {
      blockComment = !line.includes("]]");
      continue;
    }
    if (line.startsWith("--") || line.trim() === "") continue;
    const last = statements[statements.length - 1];
    if (/^\S/.test(line) && !CONTINUES.test(line)) statements.push([line]);
    else if (!last) throw new Error(`The Lua library starts inside a statement: ${line}`);
    else last.push(line);
  }
  return statements.map((lines) => {
    const text = lines.join("\n");
    return { text, defines: definedBy(lines[0] as string), mentions: words(text) };
  });
}

/**
 * The names a statement's first line defines: `local function f`, `local a, b = ...`, or an
 * assignment (`key.job = ...` adds to `key`). Any other statement defines nothing, and is kept.
 */
function definedBy(first: string): string[] {
  const fn = /^local\s+function\s+([A-Za-z_]\w*)/.exec(first);
  if (fn) return [fn[1] as string];
  const locals = /^local\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?:=|--|$)/.exec(first);
  if (locals) return (locals[1] as string).split(",").map((name) => name.trim());
  if (first.startsWith("local")) throw new Error(`Unexpected Lua library statement: ${first}`);
  const assigned = /^([A-Za-z_]\w*)[\w.]*\s*=[^=]/.exec(first);
  return assigned ? [assigned[1] as string] : [];
}

/**
 * The library as one script needs it: the statements defining a name the script mentions, and
 * those their own text mentions, and so on, in the library's order (each helper still comes
 * after what it calls). A statement that defines nothing is kept. Mentions are the words of the
 * code, so a helper may be kept that is not called (a local of the same name); never one
 * dropped that is.
 */
export function libraryFor(statements: readonly Statement[], script: string): string {
  const byName = new Map<string, Statement[]>();
  for (const statement of statements) {
    for (const name of statement.defines)
      byName.set(name, [...(byName.get(name) ?? []), statement]);
  }
  const needed = new Set<string>();
  // What a kept statement mentions is needed as much as what the script does.
  const kept = statements.filter((s) => s.defines.length === 0).flatMap((s) => [...s.mentions]);
  const queue = [...words(script), ...kept];
  while (queue.length > 0) {
    const name = queue.pop() as string;
    if (needed.has(name) || !byName.has(name)) continue;
    needed.add(name);
    for (const statement of byName.get(name) ?? []) queue.push(...statement.mentions);
  }
  return statements
    .filter((s) => s.defines.length === 0 || s.defines.some((name) => needed.has(name)))
    .map((s) => s.text)
    .join("\n");
}
