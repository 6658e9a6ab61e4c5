// Redis commands per operation (EVALSHA and the commands inside it), measured on a fresh
// redis-server with INFO commandstats: the table in docs/how-it-works.md.
import { startCountedStack } from "../dev/counted-stack";
import { DelayQueue, tick } from "../src/index";
import { createScriptRunner } from "../src/redis/runner";
import { createSchedules } from "../src/schedules/schedules";

const stack = await startCountedStack();
let now = 1_800_000_000_000;
const queue = new DelayQueue({ redis: stack.client(), prefix: "costs", clock: () => now });

async function measure(work: () => Promise<unknown>): Promise<number> {
  const before = await stack.commands();
  await work();
  return (await stack.commands()) - before;
}

const batch = (n: number, from: number, delay = 1, topic = "t", idPrefix = "j") =>
  Array.from({ length: n }, (_, i) => ({
    topic,
    id: `${idPrefix}${from + i}`,
    body: { i },
    delay,
  }));

await stack.loadScripts();

const rows: [string, number, number][] = [];
const row = async (name: string, jobs: number, work: () => Promise<unknown>) => {
  rows.push([name, await measure(work), jobs]);
};

await row("add (one job)", 1, () => queue.add({ topic: "t", id: "single", delay: 1 }));
await row("add (batch of 100)", 100, () => queue.addBatch(batch(100, 0)));
await row("add (existing id)", 1, () => queue.add({ topic: "t", id: "single" }));
now += 1000;
await row("pop (100 due, nothing promoted yet)", 100, () => queue.pop("t", { count: 100 }));
await row("pop (one job)", 1, () => queue.pop("t"));
await row("pop (empty topic)", 0, () => queue.pop("t"));
await row("finish", 1, () => queue.finish("j0"));
await row("touch", 1, () => queue.touch("j1"));
await row("release (to the ready list)", 1, () => queue.release("j1", { delay: 0 }));
await row("release (to the delay bucket)", 1, () => queue.release("j2", { delay: 5 }));
await row("bury", 1, () => queue.bury("j3"));
await row("kick (1 job)", 1, () => queue.kick("t", { count: 1 }));
await row("delete (ready job)", 1, () => queue.delete("j1"));
await row("get", 1, () => queue.get("j4"));
await row("topic stats", 0, () => queue.topic("t"));
await row("configure", 0, () => queue.configure("t", { ttr: 30 }));
now += 120_000;
await row("tick (97 leases expired)", 97, () => tick(queue));
const popped = await queue.pop("t", { count: 100 });
await row(`finish (${popped.length} at once: finishMany)`, popped.length, () =>
  queue.finishMany(popped),
);
now += 120_000;
await tick(queue);
await row("tick (idle)", 0, () => tick(queue));

// Jobs due far ahead: into a slot list, then moved when the slot opens, 90 s before it starts.
await row("add (batch of 100, due in 1 h: a slot list)", 100, () =>
  queue.addBatch(batch(100, 0, 3600, "f", "f")),
);
await row("delete (slotted job)", 1, () => queue.delete("f0"));
now += 3_480_000; // the slot of jobs due in 1 h starts 30 s earlier, and opens 90 s before that
await row("tick (its slot opens: 100 ids moved)", 100, () => tick(queue));

// Push claims (the dispatcher's claim script), of 10 due jobs: a topic without flow control, one
// whose parallelism leaves room for 2, the same once full, and one with rate 5 (5 a second, sent
// 1.1 / 5 s apart: 5 fall within the claim's 1 s reach).
const scripts = createScriptRunner(stack.client(), "costs", 3_600_000);
const claimOf = (topic: string) => () =>
  scripts.run("claim", now, [now + 65_000, 500, 100, `n${now}`, topic, 0]);
for (const [topic, flow] of [
  ["push", {}],
  ["par", { parallelism: 2 }],
  ["rate", { rate: 5 }],
] as const) {
  await queue.configure(topic, { push: { url: "https://shop.example/hook", ...flow } });
  await queue.addBatch(batch(10, 0, 0, topic, `${topic}-`));
}
await row("claim (push topic, 10 due jobs)", 10, claimOf("push"));
await row("claim (parallelism 2: 2 of 10 due)", 2, claimOf("par"));
await row("claim (parallelism full: none taken)", 0, claimOf("par"));
await row("claim (rate 5: 5 of 10 due)", 5, claimOf("rate"));

// Changing waiting jobs (a topic of their own, so that the rows above stay as they were), and
// failure reasons: an `error` costs no command more than the same release or bury without.
await queue.addBatch([
  { topic: "m", id: "m0", delay: 30 },
  { topic: "m", id: "m1", delay: 3600 },
  { topic: "m", id: "m2", delay: 30 },
  { topic: "m", id: "m3", delay: 30 },
]);
await row("reschedule (delayed, 30 s later)", 1, () => queue.reschedule("m0", { delay: 60 }));
await row("reschedule (slotted, to due in 30 s)", 1, () => queue.reschedule("m1", { delay: 30 }));
await row("reschedule (delayed, to due in 1 h: a slot list)", 1, () =>
  queue.reschedule("m3", { delay: 3600 }),
);
await row("promote", 1, () => queue.promote("m2"));
await queue.addBatch(batch(2, 0, 0, "e", "e"));
await queue.pop("e", { count: 2 });
await row("release (to the delay bucket, with error)", 1, () =>
  queue.release("e0", { delay: 5, error: "card declined" }),
);
await row("bury (with error)", 1, () => queue.bury("e1", { error: "card declined" }));

// Recurring schedules: put (its fires within 80 s made ahead), read, list, the tick's making of
// a fire (its read and make calls), delete.
const schedules = createSchedules({
  scripts: createScriptRunner(stack.client(), "costs", 3_600_000),
  defaults: { ttrMs: 60_000, maxAttempts: 10 },
});
await row("schedule put (hourly: no fire within 80 s)", 1, () =>
  schedules.put("hourly", { cron: "0 * * * *", topic: "s" }, undefined, now),
);
await row("schedule put (unchanged)", 1, () =>
  schedules.put("hourly", { cron: "0 * * * *", topic: "s" }, undefined, now),
);
await row("schedule put (every 10 s: 8 fires made ahead)", 8, () =>
  schedules.put("tens", { cron: "*/10 * * * * *", topic: "s" }, undefined, now),
);
await row("schedule get", 1, () => schedules.get("hourly", undefined, now));
await row("schedule list (2)", 1, () => schedules.list({}, undefined, now));
now += 60_000;
await row("schedules' fires made by a tick (every 10 s: 6 fires)", 6, () =>
  schedules.makeDue(now, 50),
);
await row("schedule delete (8 fires ahead taken back)", 1, () =>
  schedules.delete("tens", undefined, now),
);

console.log("| operation | commands | per job |");
console.log("|---|---:|---:|");
for (const [name, commands, jobs] of rows) {
  console.log(`| ${name} | ${commands} | ${jobs > 1 ? (commands / jobs).toFixed(2) : "-"} |`);
}
await stack.stop();
