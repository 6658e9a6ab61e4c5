// JSON text carried as is: job bodies travel from the request to Redis and back byte for byte, so
// that numbers JavaScript cannot hold (4200001234567890123, 1e400) survive (issue 8.6).

/** A JSON value kept as the text it was received as. Its text is valid JSON. */
export class RawJson {
  constructor(readonly text: string) {}
}

/**
 * JSON.stringify, except that a RawJson anywhere in `value` is written as its text, untouched.
 * (Node 20 has no JSON.rawJSON; this does the same with a placeholder no other string can make:
 * a NUL character, which JSON.stringify always escapes.)
 */
export function stringifyJson(value: unknown): string {
  const raws: string[] = [];
  const marker = `\u0000raw${Math.random().toString(36).slice(2, 10)}:`;
  const text = JSON.stringify(value, (_key, item: unknown) =>
    item instanceof RawJson ? `${marker}${raws.push(item.text) - 1}` : item,
  );
  if (raws.length === 0) return text;
  const escaped = JSON.stringify(marker)
    .slice(1, -1)
    .replace(/[\\^$.*+?()[\]{}|]/g, "\\$&");
  return text.replace(
    new RegExp(`"${escaped}(\\d+)"`, "g"),
    (_, n: string) => raws[Number(n)] ?? "null",
  );
}

/** The value of a RawJson (parsed), or the value itself. */
export function parsedValue(value: unknown): unknown {
  return value instanceof RawJson ? JSON.parse(value.text) : value;
}
