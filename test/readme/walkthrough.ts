// Reads the README's Walkthrough (and docs/clients.md's ouqiang block) into steps (a command and
// the answer shown under it) and matches shown answers, with their placeholders, against what a
// shell really printed.

/** One command of the walkthrough and the answer lines the docs show under it. */
export type Step = {
  /** The command as written (continuation lines joined with their newlines). */
  command: string;
  /** The answer lines, without their `# `; none when the docs show no answer. */
  expected: string[];
  /** The command's line in its file, 1-based, for messages. */
  line: number;
};

/** The sections whose shell blocks run, in this order, in one shell: each file's heading. */
export const SECTIONS = [
  { file: "README.md", heading: "## Walkthrough" },
  { file: "docs/clients.md", heading: "## Compatibility with ouqiang/delay-queue" },
] as const;

/** Where a step is written: its file and line, for messages. */
export type PlacedStep = Step & { file: string };

/** The steps of every section of SECTIONS, each file read with `read` (a path from the root). */
export function documentedSteps(read: (file: string) => string): PlacedStep[] {
  return SECTIONS.flatMap(({ file, heading }) =>
    walkthroughSteps(read(file), [heading]).map((step) => ({ ...step, file })),
  );
}

/**
 * The steps of every ```sh block in a markdown text's sections named in `headings` (each from its
 * heading to the next `## `). Within a block, a command is any line not starting with `#`; the
 * comment lines right under a command are its answer; a blank line ends an answer, so comments
 * after one are prose. A line ending with `\` continues the command on the next line.
 */
export function walkthroughSteps(
  markdown: string,
  headings: readonly string[] = ["## Walkthrough"],
): Step[] {
  return headings.flatMap((heading) => sectionSteps(markdown, heading));
}

/** The steps of one section's shell blocks (see walkthroughSteps). */
function sectionSteps(markdown: string, heading: string): Step[] {
  const lines = markdown.split("\n");
  const start = lines.findIndex((line) => line.trim() === heading);
  if (start < 0) throw new Error(`no "${heading}" section`);
  let end = lines.findIndex((line, i) => i > start && line.startsWith("## "));
  if (end < 0) end = lines.length;

  const steps: Step[] = [];
  let inBlock = false;
  let step: Step | undefined;
  let answering = false;
  let continues = false;
  for (let i = start + 1; i < end; i++) {
    const line = lines[i] ?? "";
    if (!inBlock) {
      if (/^```(sh|bash|shell)\s*$/.test(line)) inBlock = true;
      continue;
    }
    if (line.startsWith("```")) {
      inBlock = false;
      step = undefined;
      answering = false;
      continues = false;
      continue;
    }
    if (continues && step) {
      step.command += `\n${line}`;
      continues = line.endsWith("\\");
      continue;
    }
    if (line.trim() === "") {
      answering = false;
      continue;
    }
    if (line.startsWith("#")) {
      if (answering && step) step.expected.push(line.replace(/^# ?/, ""));
      continue;
    }
    step = { command: line, expected: [], line: i + 1 };
    steps.push(step);
    answering = true;
    continues = line.endsWith("\\");
  }
  return steps;
}

/** What each placeholder of a shown answer stands for. */
const PLACEHOLDERS: Record<string, string> = {
  // unix milliseconds: 13 digits until the year 2286
  "<ms>": "\\d{13}",
  "<n>": "\\d+",
};
/** Any other `<word>`: a value without quotes, spaces, commas or brackets. */
const ANY_VALUE = '[^"\\s,{}\\[\\]]+';

/** The pattern a shown answer line stands for: exact text, but for placeholders and `…`. */
export function answerPattern(shown: string): RegExp {
  let pattern = "";
  const tokens = /<[a-z][a-z-]*>|…/g;
  let last = 0;
  for (const match of shown.matchAll(tokens)) {
    pattern += escapeRegExp(shown.slice(last, match.index));
    const token = match[0];
    pattern += token === "…" ? ".*?" : (PLACEHOLDERS[token] ?? ANY_VALUE);
    last = match.index + token.length;
  }
  pattern += escapeRegExp(shown.slice(last));
  return new RegExp(`^${pattern}$`, "u");
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Why the printed lines are not the shown answer (undefined when they are): every shown line must
 * match the printed line at its place, and nothing more may be printed.
 */
export function answerMismatch(expected: string[], actual: string[]): string | undefined {
  for (let i = 0; i < Math.max(expected.length, actual.length); i++) {
    const shown = expected[i];
    const printed = actual[i];
    if (shown === undefined) return `it printed a line the docs do not show: ${printed}`;
    if (printed === undefined) return `it did not print: ${shown}`;
    if (!answerPattern(shown).test(printed)) {
      return `line ${i + 1} differs:\n  shown:   ${shown}\n  printed: ${printed}`;
    }
  }
  return undefined;
}

/**
 * Whether a command only reads (a curl GET against the API, maybe after a sleep): such a command
 * may be asked again while the state it shows is still on its way, as a person pasting line by
 * line would see it a few seconds later.
 */
export function onlyReads(command: string): boolean {
  return (
    /^(sleep [\d.]+; )?curl -s [^|;&<>`$]*\$API[^|;&<>`]*$/.test(command) &&
    !/\s-(d|X|F|T)\b|--data/.test(command)
  );
}
