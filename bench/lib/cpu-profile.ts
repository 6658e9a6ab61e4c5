// Summarises a V8 .cpuprofile (node --cpu-prof): self and inclusive time by package and the top
// functions by self time, so a profile of the service can be read without DevTools.
import { readFileSync } from "node:fs";

type CallFrame = { functionName: string; url: string; lineNumber: number };
type ProfileNode = { id: number; callFrame: CallFrame; children?: number[] };
type Profile = {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
};

/** Where a frame's code lives: a package, a part of Node, a part of delayq, or a V8 pseudo-frame. */
export function categoryOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === "") return functionName.startsWith("(") ? functionName : "(native)";
  const modules = url.lastIndexOf("node_modules/");
  if (modules >= 0) {
    const parts = url.slice(modules + "node_modules/".length).split("/");
    return parts[0]?.startsWith("@") ? `${parts[0]}/${parts[1]}` : (parts[0] ?? url);
  }
  if (url.startsWith("node:internal/deps/undici")) return "undici (node:internal)";
  if (url.startsWith("node:")) {
    const path = url.slice("node:".length).replace(/^internal\//, "");
    return `node:${path.split("/")[0]?.replace(/\.js$/, "")}`;
  }
  const src = url.match(/\/(src|functions|dev)\/(.*)$/);
  if (src) return `delayq ${src[1]}/${src[2]?.split("/")[0]?.replace(/\.ts$/, "")}`;
  return url;
}

const pct = (part: number, whole: number) => `${((part * 100) / whole).toFixed(1)}%`.padStart(6);

/**
 * Prints the busy time (idle left out) by category, self and inclusive (time with a frame of the
 * category anywhere on the stack), and the top functions by self time. `fromUs`: ignore samples
 * before this monotonic time (µs, as process.hrtime), e.g. the process's start-up.
 */
export function printProfileSummary(file: string, fromUs = 0, top = 40): void {
  const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parent.set(child, node.id);
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const functions = new Map<string, number>();
  let busy = 0;
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    // A sample's time is the gap to the next one.
    const weight = profile.timeDeltas[i + 1] ?? 0;
    if (t < fromUs) continue;
    const node = byId.get(profile.samples[i] ?? -1);
    if (!node || node.callFrame.functionName === "(idle)") continue;
    busy += weight;
    const category = categoryOf(node.callFrame);
    self.set(category, (self.get(category) ?? 0) + weight);
    const { functionName, url, lineNumber } = node.callFrame;
    const name = `${functionName || "(anonymous)"} ${url.replace(/^.*node_modules\//, "")}:${lineNumber + 1} [${category}]`;
    functions.set(name, (functions.get(name) ?? 0) + weight);
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)?.callFrame;
      if (frame) seen.add(categoryOf(frame));
    }
    for (const c of seen) inclusive.set(c, (inclusive.get(c) ?? 0) + weight);
  }
  const sorted = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1]);
  console.log(`\n${file}: ${(busy / 1000).toFixed(0)} ms busy`);
  console.log("self time by category:");
  for (const [name, us] of sorted(self).slice(0, 30)) {
    console.log(`  ${pct(us, busy)}  ${name}`);
  }
  console.log("inclusive time by category (a frame of it anywhere on the stack):");
  for (const [name, us] of sorted(inclusive).slice(0, 30)) {
    console.log(`  ${pct(us, busy)}  ${name}`);
  }
  console.log(`top ${top} functions by self time:`);
  for (const [name, us] of sorted(functions).slice(0, top)) {
    console.log(`  ${pct(us, busy)}  ${name}`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const file of process.argv.slice(2)) printProfileSummary(file);
}
