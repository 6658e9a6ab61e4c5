// What a script file exports: its Lua (after the shared library) and the parser of its reply.

/**
 * One Lua script. `lua` opens with its contract header (arguments, reply, cost) and runs after
 * the shared library (lib/index.ts); `parse` turns the raw reply into the typed value the header
 * documents, so callers never index into reply arrays.
 */
export type Script<Reply> = {
  name: string;
  lua: string;
  parse(reply: unknown): Reply;
};

export function defineScript<Reply>(script: Script<Reply>): Script<Reply> {
  return script;
}

/** A reply that must be an array (a Lua table). */
export function asArray(reply: unknown, script: string): unknown[] {
  if (!Array.isArray(reply)) {
    throw new Error(`The ${script} script answered ${typeof reply}, not a list`);
  }
  return reply;
}

/**
 * A JSON text from a reply. A client that deserializes replies (the @upstash/redis default)
 * hands JSON objects over already parsed: they are turned back into text.
 */
export function jsonText(value: unknown): string {
  if (typeof value === "string") return value;
  return value === null || value === undefined ? "" : JSON.stringify(value);
}

/** A reply that must be a job record (a string). */
export function record(value: unknown, script: string): string {
  if (typeof value !== "string") {
    throw new Error(`The ${script} script answered ${typeof value} where a record belongs`);
  }
  return value;
}

/**
 * Each name of a list as itself, for Lua text built from the list: `${byName(LIST).x}` writes
 * "x", and fails to compile once the list has no `x`.
 */
export function byName<const Names extends readonly string[]>(
  names: Names,
): { readonly [N in Names[number]]: N } {
  return Object.fromEntries(names.map((name) => [name, name])) as {
    readonly [N in Names[number]]: N;
  };
}
