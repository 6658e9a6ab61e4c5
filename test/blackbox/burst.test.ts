// A burst past one invocation's budget, from outside: `npm run dev` (the worker in wrangler dev,
// QStash through the stand-in) with DQ_SUBREQUESTS=300, and 2,000 direct push jobs due at the
// same moment. One tick's run can pay for about a hundred of them; it hands the rest to fresh
// invocations through QStash (POST /v1/qstash/continue), timed a little before the due time.
// All must be delivered within 60 s of their due time, p99 within 10 s, never early, none twice.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkDelayqSignature,
  eventually,
  lagProbe,
  type Receiver,
  type Stack,
  sleep,
  startReceiver,
  startStack,
  summary,
} from "./support";

const JOBS = 2000;
const SECRET = "burst-secret-0123456789";
/** When the jobs fall due after they are added: past a request's own 25 s window. */
const DUE_IN_MS = 32_000;

let stack: Stack;
let rx: Receiver;

beforeAll(async () => {
  rx = await startReceiver();
  stack = await startStack({ DQ_DEV_TICK_MS: "3600000", DQ_SUBREQUESTS: "300" });
}, 150_000);

afterAll(async () => {
  await stack?.stop();
  await rx?.close();
}, 60_000);

describe("a burst past one invocation's subrequests", () => {
  it("delivers 2,000 direct jobs due at once within 60 s of their due time, p99 within 10 s, never early, none twice", async () => {
    const put = await stack.api("PUT", "/v1/topics/burst", {
      push: { url: rx.url("/burst"), secret: SECRET },
    });
    expect(put.status, put.text).toBe(200);
    const due = Date.now() + DUE_IN_MS;
    for (let from = 0; from < JOBS; from += 1000) {
      const jobs = Array.from({ length: 1000 }, (_, n) => ({
        topic: "burst",
        id: `burst-${from + n}`,
        runAt: due,
        body: { n: from + n },
      }));
      const added = await stack.api("POST", "/v1/jobs/batch", { jobs });
      expect(added.status, added.text).toBe(200);
    }
    // One tick (the cron's): it claims what its budget pays for and hands the rest off.
    await stack.tick();
    const probe = lagProbe();
    const deadline = due + 60_000;
    while (rx.hits("/burst").length < JOBS && Date.now() < deadline) await sleep(200);
    await sleep(1500); // a delivery sent twice would come now
    const lag = probe.stop();
    const hits = rx.hits("/burst");
    const ids = hits.map((hit) => JSON.parse(hit.raw).id as string);
    const missing = JOBS - new Set(ids).size;
    const lateness = summary(hits.map((hit) => hit.at - due));
    // The invocations' hand-offs and any failure, as the worker logged them.
    const logged = stack
      .output()
      .split("\n")
      .filter((line) => /"event":"(hand_off|push_budget)"|"level":"error"/.test(line));
    console.log(
      `burst: ${hits.length} deliveries of ${JOBS} jobs; lateness ms ${JSON.stringify(lateness)}; ` +
        `this process's timer lag p99 ${lag.p99Ms} ms, max ${lag.maxMs} ms\n${logged.join("\n")}`,
    );
    expect(missing, `${missing} jobs not delivered within 60 s of their due time`).toBe(0);
    expect(hits, "none delivered twice").toHaveLength(JOBS);
    expect(lateness.min, "none early").toBeGreaterThanOrEqual(0);
    expect(lateness.p99).toBeLessThanOrEqual(10_000);
    for (const hit of hits.slice(0, 20))
      checkDelayqSignature(SECRET, hit.headers["delayq-signature"], hit.raw);
    // Each job finished, at its first attempt (its settle may come a moment after its delivery
    // on a machine this loaded).
    for (const n of [0, 999, 1000, JOBS - 1]) {
      const job = await eventually(
        () => stack.api("GET", `/v1/jobs/burst-${n}`),
        (res) => res.json?.job?.state === "finished",
        10_000,
      );
      expect(job.json.job).toMatchObject({ state: "finished", attempts: 1 });
    }
  }, 150_000);
});
