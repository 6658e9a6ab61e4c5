// Finds the exact text of job bodies inside a request's JSON, so they are stored as sent.
import { RawJson } from "../domain/raw-json";

type Path = readonly (string | number)[];

/**
 * Where job bodies sit in each request that adds jobs: `*` is any array index. The command
 * protocol takes one command or an array of them.
 */
const BODY_PATHS: Record<string, readonly Path[]> = {
  "/v1/jobs": [["body"]],
  "/v1/jobs/batch": [["jobs", "*", "body"]],
  "/v1/command": [["body"], ["*", "body"]],
  "/v1/payments": [["metadata"]],
  "/v1/refunds": [["metadata"]],
};

/**
 * Replaces the job bodies in `parsed` (the request's JSON, already parsed) by RawJson holding
 * their text as sent. `text` must be the text `parsed` came from (valid JSON).
 */
export function keepRawBodies(path: string, text: string, parsed: unknown): boolean {
  const patterns = BODY_PATHS[path];
  if (!patterns) return false;
  const found: { at: Path; text: string }[] = [];
  new Scanner(
    text,
    (at) => classify(patterns, at),
    (at, start, end) => {
      found.push({ at, text: text.slice(start, end) });
    },
  ).value([]);
  for (const { at, text: raw } of found) {
    let node: unknown = parsed;
    for (const part of at.slice(0, -1)) node = (node as Record<string | number, unknown>)?.[part];
    const last = at[at.length - 1] as string | number;
    if (node !== null && typeof node === "object" && last in node) {
      (node as Record<string | number, unknown>)[last] = new RawJson(raw);
    }
  }
  return true;
}

/** What the walk does at `at`: a body is taken; a container on the way to one, entered. */
type Step = "take" | "enter" | "pass";

function classify(patterns: readonly Path[], at: Path): Step {
  let below = false;
  for (const pattern of patterns) {
    if (pattern.length < at.length || !fits(pattern, at)) continue;
    if (pattern.length === at.length) return "take";
    below = true;
  }
  // Anything not on the way to a body is passed over without recursion, however deeply it nests.
  return below ? "enter" : "pass";
}

/** Whether `at` is where `pattern` starts: each part the same, or a `*` over an array index. */
function fits(pattern: Path, at: Path): boolean {
  for (let i = 0; i < at.length; i++) {
    const part = at[i];
    if (pattern[i] !== part && !(pattern[i] === "*" && typeof part === "number")) return false;
  }
  return true;
}

/**
 * A walk over valid JSON text that reports the span of each value `step` says to take. It enters
 * only the containers `step` says lead to one, and measures a container's span only when it is
 * taken: a batch's text is read about once, not once per level it nests.
 */
class Scanner {
  private pos = 0;

  constructor(
    private readonly text: string,
    private readonly step: (path: Path) => Step,
    private readonly take: (path: Path, start: number, end: number) => void,
  ) {}

  /** Walks the value at the current position, found at `path`. */
  value(path: Path): void {
    this.space();
    const start = this.pos;
    const step = this.step(path);
    const c = this.text.charCodeAt(this.pos);
    if (step === "enter" && c === 0x7b /* { */) {
      this.pos += 1;
      this.object(path);
    } else if (step === "enter" && c === 0x5b /* [ */) {
      this.pos += 1;
      this.array(path);
    } else {
      if (c === 0x7b || c === 0x5b) this.skipContainer();
      else if (c === 0x22 /* " */) this.skipString();
      else this.skipLiteral();
      if (step === "take") this.take(path, start, this.pos);
    }
  }

  private object(path: Path): void {
    this.space();
    if (this.text.charCodeAt(this.pos) === 0x7d) {
      this.pos += 1;
      return;
    }
    for (;;) {
      this.space();
      this.notPastEnd();
      const keyStart = this.pos;
      this.skipString();
      const quoted = this.text.slice(keyStart, this.pos);
      // Most keys have no escape: their text between the quotes is the key.
      const key = quoted.includes("\\") ? (JSON.parse(quoted) as string) : quoted.slice(1, -1);
      this.space();
      this.pos += 1; // :
      this.value([...path, key]);
      this.space();
      const c = this.text.charCodeAt(this.pos);
      this.pos += 1; // , or }
      if (c === 0x7d) return;
    }
  }

  private array(path: Path): void {
    this.space();
    if (this.text.charCodeAt(this.pos) === 0x5d) {
      this.pos += 1;
      return;
    }
    for (let i = 0; ; i++) {
      this.notPastEnd();
      this.value([...path, i]);
      this.space();
      const c = this.text.charCodeAt(this.pos);
      this.pos += 1; // , or ]
      if (c === 0x5d) return;
    }
  }

  /** Moves past the object or array at the position; returns where it ends. */
  private skipContainer(): number {
    let depth = 0;
    const { text } = this;
    while (this.pos < text.length) {
      const c = text.charCodeAt(this.pos);
      if (c === 0x22) {
        this.skipString();
        continue;
      }
      this.pos += 1;
      if (c === 0x7b || c === 0x5b) depth += 1;
      else if (c === 0x7d || c === 0x5d) {
        depth -= 1;
        if (depth === 0) break;
      }
    }
    return this.pos;
  }

  /** Moves past the string at the position. */
  private skipString(): void {
    this.pos = Math.min(closingQuote(this.text, this.pos) + 1, this.text.length);
  }

  private skipLiteral(): void {
    const { text } = this;
    while (this.pos < text.length) {
      const c = text.charCodeAt(this.pos);
      if (c === 0x2c || c === 0x7d || c === 0x5d || c <= 0x20) return;
      this.pos += 1;
    }
  }

  /**
   * The text is valid JSON (it was parsed first), so a walk never reaches its end inside a
   * container; were a bug to make it, the loops above would spin forever on the request.
   */
  private notPastEnd(): void {
    if (this.pos >= this.text.length) throw new Error("the body scan ran past the end of the JSON");
  }

  private space(): void {
    const { text } = this;
    while (this.pos < text.length && text.charCodeAt(this.pos) <= 0x20) this.pos += 1;
  }
}

/**
 * Where the JSON string opened at `open` ends: the first quote after it that an even number of
 * backslashes precedes (the text's length when none does). indexOf finds each candidate natively
 * rather than a loop per character: a 100-job batch of 80-character bodies was scanned in about
 * half the time.
 */
export function closingQuote(text: string, open: number): number {
  let from = open + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) return text.length;
    // The opening quote stops this walk: a string is never preceded by its own backslash.
    let slashes = 0;
    while (text.charCodeAt(quote - 1 - slashes) === 0x5c /* \ */) slashes += 1;
    if (slashes % 2 === 0) return quote;
    from = quote + 1;
  }
}
