// The raw text of members of Alipay's JSON answers, byte for byte as signed, for verification.

import { parseJson } from "./provider";

const WHITESPACE = new Set([" ", "\t", "\n", "\r"]);

function skipWhitespace(text: string, at: number): number {
  while (at < text.length && WHITESPACE.has(text[at] as string)) at++;
  return at;
}

/** The index after the string literal opening at `at`. */
function endOfString(text: string, at: number): number {
  for (let i = at + 1; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") i++;
    else if (c === '"') return i + 1;
  }
  return -1;
}

/** The index after the JSON value starting at `at` (string-aware, so braces in text don't count). */
function endOfValue(text: string, at: number): number {
  const first = text[at];
  if (first === '"') return endOfString(text, at);
  if (first === "{" || first === "[") {
    let depth = 0;
    for (let i = at; i < text.length; ) {
      const c = text[i];
      if (c === '"') {
        i = endOfString(text, i);
        if (i < 0) return -1;
        continue;
      }
      if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    return -1;
  }
  let i = at;
  while (i < text.length && !",}] \t\n\r".includes(text[i] as string)) i++;
  return i;
}

/**
 * The raw text of every value of top-level member `key` in a JSON object text, exactly as received
 * (`\/` escapes and spacing kept): Alipay signs those bytes, so they must never be re-serialised.
 * Expects text that JSON.parse accepted.
 */
export function rawMembers(text: string, key: string): string[] {
  const found: string[] = [];
  let at = skipWhitespace(text, 0);
  if (text[at] !== "{") return found;
  at++;
  for (;;) {
    at = skipWhitespace(text, at);
    if (text[at] !== '"') return found;
    const keyEnd = endOfString(text, at);
    if (keyEnd < 0) return found;
    const name = parseJson(text.slice(at, keyEnd));
    at = skipWhitespace(text, keyEnd);
    if (text[at] !== ":") return found;
    at = skipWhitespace(text, at + 1);
    const valueEnd = endOfValue(text, at);
    if (valueEnd < 0) return found;
    if (name === key) found.push(text.slice(at, valueEnd));
    at = skipWhitespace(text, valueEnd);
    if (text[at] !== ",") return found;
    at++;
  }
}
