import { renameSync, rmSync, writeFileSync } from "node:fs";

/**
 * Writes `text` to `file` so that a reader finds the old content or the new, never a part of
 * it: the text goes to a temporary file beside it, which then replaces `file` (rename(2) is
 * atomic within one file system). Readers that wait for a file to appear (the tests, scripts
 * reading `.dev/stack.json`) so never parse a half-written one.
 */
export function writeFileAtomic(file: string, text: string, mode = 0o600): void {
  const temp = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(temp, text, { mode });
    renameSync(temp, file);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
}
