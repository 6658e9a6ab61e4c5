// The scripts as one Redis function library (FUNCTION LOAD, then FCALL), for a client that can
// use one (the TCP driver on a single server). A script (EVAL) defines its library helpers again
// on every call; a function library defines them once, when Redis loads it: an empty pop takes
// 9.5-16 µs of Redis time instead of 22-40 (INFO commandstats). The scripts' Lua is the same text.
import { LUA_LIB } from "../lib";
import { statementsOf } from "../lib/shake";
import { SCRIPTS, type ScriptName, TIMED, timed } from "./index";

/**
 * Library statements that read the call or hold its state, so run again on entry to every
 * function: `redis.call` (not reachable while Redis loads a library), the common arguments
 * (`P`, `NOW`, `RETENTION`, `PART`, `PARTS`), the keys built from the key base, and the tables a call fills as it
 * goes (`local x = {}`; `key` is the table of key builders, filled once). Everything else defines
 * a helper or a constant and stays at the library's top level, defined once.
 */
export function perCall(statement: string): boolean {
  return (
    /^local (rcall|P|NOW|RETENTION|PART|PARTS) =/.test(statement) ||
    /^key\.\w+ = P \.\./.test(statement) ||
    (/^local \w+ = \{\}\s*(--.*)?$/.test(statement) && !statement.startsWith("local key "))
  );
}

export type FunctionLibrary = {
  /** The library's name; it changes whenever its text does, so deployments never mix versions. */
  name: string;
  /** What FUNCTION LOAD takes. */
  text: string;
  /** The name FCALL takes for a script. */
  functionName(script: ScriptName): string;
};

let built: FunctionLibrary | undefined;

/** The library: every script a function of it, built once. */
export function functionLibrary(): FunctionLibrary {
  if (built) return built;
  const top: string[] = ["local KEYS, ARGV"];
  const entry: string[] = ["KEYS, ARGV = keys, args"];
  for (const { text } of statementsOf(LUA_LIB)) {
    if (!perCall(text)) {
      top.push(text);
      continue;
    }
    const local = /^local (\w+) =/.exec(text);
    if (local) top.push(`local ${local[1]}`);
    entry.push(local ? text.slice("local ".length) : text);
  }
  top.push(`local function enter(keys, args)\n  ${entry.join("\n  ")}\nend`);
  const body = top.join("\n");
  const version = hash(`${body}\n${Object.values(SCRIPTS).map((s) => s.lua)}`);
  const name = `delayq_${version}`;
  const functionName = (script: ScriptName) => `${name}_${script}`;
  const functions = (Object.keys(SCRIPTS) as ScriptName[]).map(
    (script) =>
      `redis.register_function('${functionName(script)}', function(keys, args)\n  enter(keys, args)\n${TIMED.has(script) ? timed(SCRIPTS[script].lua) : SCRIPTS[script].lua}\nend)`,
  );
  built = { name, text: `#!lua name=${name}\n${body}\n${functions.join("\n")}\n`, functionName };
  return built;
}

/** 53 bits of the text (cyrb53), as 11 base-36 digits: a version, not a secret. */
function hash(text: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36).padStart(11, "0");
}
