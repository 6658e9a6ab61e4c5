// The typed client's own CPU per call on Node, with the global fetch (undici) and with nodeFetch
// (delayq/client/node), alternating, against the service on one redis-server over TCP: eight
// callers popping an empty topic (one request, one small answer each). A third row sends the same
// request through nodeFetch by hand, without the typed client: the floor the client's own layers
// (time limit, retries, answer checks) add to.
// `npx tsx bench/client-fetch.ts [--calls 4000] [--reps 4]`
import { parseArgs } from "node:util";
import { createClient, type FetchLike } from "../src/client";
import { nodeFetch } from "../src/client/node";
import { log } from "./lib/measure";
import { API_TOKEN, openStack } from "./single/stack";

const { values } = parseArgs({
  options: { calls: { type: "string", default: "4000" }, reps: { type: "string", default: "4" } },
});
const calls = Number(values.calls);
const reps = Number(values.reps);
if (!Number.isInteger(calls) || calls < 8 || !Number.isInteger(reps) || reps <= 0) {
  throw new Error("--calls wants an integer ≥ 8, --reps a positive integer");
}

const stack = await openStack("tcp");
try {
  const byHand = nodeFetch();
  const url = `${stack.service.url}/v1/topics/client-fetch-empty/pop`;
  const init = {
    method: "POST",
    headers: { authorization: `Bearer ${API_TOKEN}`, "content-type": "application/json" },
    body: "{}",
  };
  const popByHand = async () => {
    const reply = await byHand(url, init);
    const answer = JSON.parse(await reply.text()) as { jobs?: unknown };
    if (reply.status !== 200 || !Array.isArray(answer.jobs)) throw new Error("pop refused");
  };
  const pops: Record<string, () => Promise<unknown>> = {};
  for (const [name, send] of Object.entries<FetchLike>({
    "global fetch": (input, init) => fetch(input, init),
    nodeFetch: nodeFetch(),
  })) {
    const client = createClient({ baseUrl: stack.service.url, token: API_TOKEN, fetch: send });
    pops[name] = () => client.pop("client-fetch-empty");
  }
  pops["nodeFetch without the client"] = popByHand;
  const results: Record<string, number[]> = Object.fromEntries(
    Object.keys(pops).map((name) => [name, []]),
  );
  for (let rep = 0; rep <= reps; rep++) {
    for (const [name, pop] of Object.entries(pops)) {
      const before = process.cpuUsage();
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = 0; i < calls / 8; i++) await pop();
        }),
      );
      const used = process.cpuUsage(before);
      // Repetition 0 warms both up (connections, V8's compiler) and is not counted.
      if (rep > 0) results[name]?.push((used.user + used.system) / 1000 / calls);
    }
  }
  for (const [name, runs] of Object.entries(results)) {
    const sorted = [...runs].sort((a, b) => a - b);
    log(
      `${name}: client CPU ms per call, min ${sorted[0]?.toFixed(3)}, ` +
        `median ${sorted[Math.floor(sorted.length / 2)]?.toFixed(3)} (${runs.map((r) => r.toFixed(3)).join(", ")})`,
    );
  }
} finally {
  await stack.close();
}
