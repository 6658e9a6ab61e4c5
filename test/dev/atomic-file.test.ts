// stack.json is written whole or not at all: a test that saw it appear once parsed a half of it
// (CI, "Unexpected end of JSON input" in dev-stack-env.test.ts).
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { writeFileAtomic } from "../../dev/atomic-file";

const dir = mkdtempSync(join(tmpdir(), "dq-atomic-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** All of an open file's bytes, from its start. */
function readFd(fd: number): string {
  const buffer = Buffer.alloc(1 << 16);
  const length = readSync(fd, buffer, 0, buffer.length, 0);
  return buffer.subarray(0, length).toString("utf8");
}

describe("writeFileAtomic", () => {
  it("replaces the file instead of rewriting it: a reader of the old one still reads all of it", () => {
    const file = join(dir, "replace.json");
    const old = JSON.stringify({ old: "x".repeat(5_000) });
    writeFileSync(file, old);
    const fd = openSync(file, "r");
    try {
      writeFileAtomic(file, JSON.stringify({ fresh: true }));
      // Truncating and rewriting in place would show this reader the new bytes or none.
      expect(readFd(fd)).toBe(old);
    } finally {
      closeSync(fd);
    }
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ fresh: true });
  });

  it("leaves only the file, readable by its owner alone unless told otherwise", () => {
    const sub = join(dir, "modes");
    mkdirSync(sub);
    writeFileAtomic(join(sub, "secret.json"), "{}");
    writeFileAtomic(join(sub, "open.json"), "{}", 0o644);
    expect(readdirSync(sub).sort()).toEqual(["open.json", "secret.json"]);
    expect(statSync(join(sub, "secret.json")).mode & 0o777).toBe(0o600);
    expect(statSync(join(sub, "open.json")).mode & 0o777).toBe(0o644);
  });

  it("fails as the write failed and leaves no temporary file behind", () => {
    const sub = join(dir, "fails");
    mkdirSync(join(sub, "stack.json"), { recursive: true }); // a directory where the file goes
    expect(() => writeFileAtomic(join(sub, "stack.json"), "{}")).toThrow(/EISDIR|EEXIST|ENOTEMPTY/);
    expect(readdirSync(sub)).toEqual(["stack.json"]);
    expect(existsSync(join(sub, "missing", "x.json"))).toBe(false);
    expect(() => writeFileAtomic(join(sub, "missing", "x.json"), "{}")).toThrow(/ENOENT/);
  });
});
