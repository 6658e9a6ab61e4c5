// vitest globalSetup of the node project: says in one line which suites are skipped for want of a
// tool and what to install (see tools.ts). Nothing under CI, where every suite must run.
import { skippedLine } from "./tools";

export default function setup(): void {
  const line = skippedLine();
  if (line) console.log(line);
}
