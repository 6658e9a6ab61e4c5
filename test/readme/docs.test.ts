// README.md and docs/ as documentation of the product as it is: a README of at most 300 lines
// whose map names every page, links and anchors that resolve, and no history (commit ids, dates).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");
const pages = readdirSync(join(root, "docs"))
  .filter((name) => name.endsWith(".md"))
  .map((name) => `docs/${name}`);
const documents = ["README.md", ...pages];
const read = (file: string) => readFileSync(join(root, file), "utf8");

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\- ]/gu, "")
    .replace(/ /g, "-");
}

/** The anchors of a markdown file's headings (those inside code blocks are not headings). */
function anchors(file: string): Set<string> {
  const found = new Set<string>();
  let fenced = false;
  for (const line of read(file).split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6} (.*)$/.exec(line);
    if (heading?.[1]) found.add(slug(heading[1]));
  }
  return found;
}

/** The text outside code blocks, where prose and links are. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, "");
}

describe("README.md and docs/", () => {
  it("keeps the README within 300 lines, its map naming every page of docs/", () => {
    const readme = read("README.md");
    expect(readme.split("\n").length).toBeLessThanOrEqual(300);
    expect(pages.length).toBeGreaterThanOrEqual(7);
    for (const page of pages) expect(readme, `README's map lacks ${page}`).toContain(`](${page})`);
  });

  it("links only to files and headings that exist", () => {
    const broken: string[] = [];
    for (const file of documents) {
      for (const [, target = ""] of prose(read(file)).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue;
        const [path = "", anchor] = target.split("#");
        const linked = path ? normalize(join(dirname(file), path)) : file;
        if (!existsSync(join(root, linked))) broken.push(`${file}: ${target} (no such file)`);
        else if (anchor && linked.endsWith(".md") && !anchors(linked).has(anchor)) {
          broken.push(`${file}: ${target} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it("tells no history: no commit ids and no dates (those go to CHANGELOG.md and bench/)", () => {
    const found: string[] = [];
    for (const file of documents) {
      read(file)
        .split("\n")
        .forEach((line, i) => {
          // A commit id: 7 to 40 hex digits, letters and digits both. A date: 2026-11-27.
          for (const [match] of line.matchAll(
            /\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b|\b20\d\d-[01]\d-[0-3]\d\b/g,
          )) {
            found.push(`${file}:${i + 1}: ${match}`);
          }
        });
    }
    expect(found).toEqual([]);
  });
});
