// Job routes through the real app (app.request) on a real queue: happy, error and edge cases.
import { describe, expect, it } from "vitest";
import { partitions } from "../../src/redis/partitions";
import { testApp } from "../support/app";
import { TEST_PARTITIONS } from "../support/redis";

describe("POST /v1/jobs", () => {
  it("adds a job: 201, then 200 with created false for the same id", async () => {
    const { call, clock } = testApp();
    const first = await call("POST", "/v1/jobs", {
      body: { topic: "orders", id: "o-1", body: { total: 42 }, delay: 30, ttr: 5 },
    });
    expect(first.status).toBe(201);
    expect(first.json).toEqual({
      created: true,
      job: {
        id: "o-1",
        topic: "orders",
        state: "delayed",
        body: { total: 42 },
        dueAt: clock.now + 30_000,
        ttr: 5,
        attempts: 0,
        maxAttempts: 10,
        createdAt: clock.now,
      },
    });
    const again = await call("POST", "/v1/jobs", { body: { topic: "orders", id: "o-1" } });
    expect(again.status).toBe(200);
    expect(again.json).toEqual({ created: false, job: first.json.job });
  });

  it("answers 409 job_exists for an id used by another topic", async () => {
    const { call } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "a", id: "x" } });
    const res = await call("POST", "/v1/jobs", { body: { topic: "b", id: "x" } });
    expect(res.status).toBe(409);
    expect(res.json.error.code).toBe("job_exists");
  });

  it("accepts runAt as ISO-8601 and a body without a JSON Content-Type", async () => {
    const { call, clock } = testApp();
    const runAt = new Date(clock.now + 5000).toISOString();
    const res = await call("POST", "/v1/jobs", {
      body: JSON.stringify({ topic: "t", runAt }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(res.status).toBe(201);
    expect(res.json.job.dueAt).toBe(clock.now + 5000);
  });

  it.each([
    ["malformed JSON", "{nope", /not valid JSON/],
    ["an empty body", "", /topic/],
    ["a JSON array", "[1]", /request body/],
    ["a bad topic", { topic: "no spaces" }, /topic: must be/],
    ["an unknown field", { topic: "t", dealy: 3 }, /unknown field "dealy"/],
    ["a string delay", { topic: "t", delay: "10" }, /delay/],
    ["a negative delay", { topic: "t", delay: -5 }, /delay/],
    ["a huge ttr", { topic: "t", ttr: 1e12 }, /ttr/],
    ["an over-long id", { topic: "t", id: "i".repeat(200) }, /id: must be/],
    ["a slash in the id", { topic: "t", id: "a/b" }, /id: must be/],
    ["delay and runAt", { topic: "t", delay: 1, runAt: 1 }, /either delay or runAt/],
  ])("answers 400 invalid_request naming the field for %s", async (_, body, message) => {
    const { call, redis, keys } = testApp();
    const res = await call("POST", "/v1/jobs", { body });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe("invalid_request");
    expect(res.json.error.message).toMatch(message);
    expect(await redis.exists(keys.topics)).toBe(0);
  });

  it("takes a JSON Content-Type without any body as no body, not as broken JSON", async () => {
    // Found by the HTTP fuzzer (seed 459495122): a pop so sent once answered 500.
    const { call, redis, keys } = testApp();
    const headers = { "content-type": "application/json" };
    const pop = await call("POST", "/v1/topics/t/pop", { headers });
    expect(pop.status).toBe(200);
    expect(pop.json).toEqual({ jobs: [] });
    const add = await call("POST", "/v1/jobs", { headers });
    expect(add.status).toBe(400);
    expect(add.json.error.code).toBe("invalid_request");
    expect(add.json.error.message).toMatch(/^Invalid request body: topic/);
    expect(await redis.exists(keys.topics)).toBe(0);
  });

  it("answers 413 payload_too_large for a body over 256 KiB and stores nothing", async () => {
    const { call } = testApp();
    const res = await call("POST", "/v1/jobs", {
      body: { topic: "t", id: "big", body: "x".repeat(300 * 1024) },
    });
    expect(res.status).toBe(413);
    expect(res.json.error.code).toBe("payload_too_large");
    expect((await call("GET", "/v1/jobs/big")).status).toBe(404);
  });

  it("answers 413 for a request over the request limit before reading it all", async () => {
    const { call } = testApp({ maxRequestBytes: 2048 });
    const res = await call("POST", "/v1/jobs", { body: { topic: "t", body: "y".repeat(4096) } });
    expect(res.status).toBe(413);
    expect(res.json.error.message).toMatch(/over 2048 bytes/);
  });
});

describe("POST /v1/jobs/batch", () => {
  it("adds many jobs with one result per item", async () => {
    const { call, stats } = testApp();
    const res = await call("POST", "/v1/jobs/batch", {
      body: {
        jobs: [
          { topic: "t", id: "a" },
          { topic: "t", id: "a" },
          { topic: "bad topic" },
          { topic: "t", id: "b", body: "x".repeat(300 * 1024) },
        ],
      },
    });
    expect(res.status).toBe(200);
    expect(
      res.json.results.map((r: { created?: boolean; error?: { code: string } }) =>
        r.error ? r.error.code : r.created,
      ),
    ).toEqual([true, false, "invalid_request", "payload_too_large"]);
    // One add; with partitions (node-cluster) "a"'s index entry is claimed first in its own
    // partition, another than topic t's.
    expect((await stats()).requests.total).toBe(TEST_PARTITIONS === 1 ? 1 : 2);
  });

  it("answers job_exists for an id the batch gave already for another topic, wherever it lives", async () => {
    const { call } = testApp();
    // Two topics of two partitions when there are several (node-cluster).
    const layout = partitions("any", TEST_PARTITIONS);
    const second = ["u", "v", "w"].find((t) => layout.ofTopic(t) !== layout.ofTopic("t")) ?? "u";
    const res = await call("POST", "/v1/jobs/batch", {
      body: {
        jobs: [
          { topic: "t", id: "twice", body: "first" },
          { topic: second, id: "twice", body: "second" },
        ],
      },
    });
    expect(res.status).toBe(200);
    expect(res.json.results[0].created).toBe(true);
    expect(res.json.results[1].error.code).toBe("job_exists");
    const job = await call("GET", "/v1/jobs/twice");
    expect(job.json.job).toMatchObject({ topic: "t", body: "first" });
    expect((await call("GET", `/v1/topics/${second}`)).json.counts.ready).toBe(0);
  });

  it.each([
    [{ jobs: [] }, /jobs/],
    [{ jobs: "nope" }, /jobs/],
    [{}, /jobs/],
    [{ jobs: Array.from({ length: 1001 }, () => ({ topic: "t" })) }, /jobs/],
  ])("answers 400 for a batch that is not 1-1000 jobs (%#)", async (body, message) => {
    const { call } = testApp();
    const res = await call("POST", "/v1/jobs/batch", { body });
    expect(res.status).toBe(400);
    expect(res.json.error.message).toMatch(message);
  });
});

describe("GET and DELETE /v1/jobs/{id}", () => {
  it("gets a job, deletes it, and the deleted job is never handed out", async () => {
    const { call } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "t", id: "g", body: [1, 2] } });
    const got = await call("GET", "/v1/jobs/g");
    expect(got.status).toBe(200);
    expect(got.json.job).toMatchObject({ id: "g", state: "ready", body: [1, 2] });
    expect((await call("DELETE", "/v1/jobs/g")).json).toEqual({ deleted: true });
    expect((await call("GET", "/v1/jobs/g")).json.job.state).toBe("deleted");
    expect((await call("POST", "/v1/topics/t/pop")).json).toEqual({ jobs: [] });
  });

  it("answers 404 job_not_found and 400 for a bad id", async () => {
    const { call } = testApp();
    const missing = await call("GET", "/v1/jobs/nope");
    expect(missing.status).toBe(404);
    expect(missing.json.error).toEqual({
      code: "job_not_found",
      message: expect.stringMatching(/nope does not exist/),
      requestId: expect.stringMatching(/^[\w-]{36}$/),
    });
    expect((await call("DELETE", "/v1/jobs/nope")).status).toBe(404);
    const bad = await call("GET", `/v1/jobs/${"z".repeat(129)}`);
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/Invalid path: id/);
  });
});

describe("finish, touch, release, bury", () => {
  async function reserved() {
    const t = testApp();
    await t.call("POST", "/v1/jobs", { body: { topic: "t", id: "r", ttr: 10 } });
    const pop = await t.call("POST", "/v1/topics/t/pop", { body: { count: 1 } });
    return { ...t, receipt: pop.json.jobs[0].receipt as string };
  }

  it("finish with the receipt: 200, then the job is finished", async () => {
    const { call, receipt } = await reserved();
    const res = await call("POST", "/v1/jobs/r/finish", { body: { receipt } });
    expect(res).toMatchObject({ status: 200, json: { finished: true } });
    expect((await call("GET", "/v1/jobs/r")).json.job.state).toBe("finished");
  });

  it("finish without a body finishes for whoever holds the job", async () => {
    const { call } = await reserved();
    expect((await call("POST", "/v1/jobs/r/finish")).status).toBe(200);
  });

  it("answers 409 stale_receipt and 409 not_reserved", async () => {
    const { call } = await reserved();
    const stale = await call("POST", "/v1/jobs/r/finish", { body: { receipt: "old.0" } });
    expect(stale.status).toBe(409);
    expect(stale.json.error.code).toBe("stale_receipt");
    await call("POST", "/v1/jobs", { body: { topic: "t", id: "waiting", delay: 60 } });
    const notReserved = await call("POST", "/v1/jobs/waiting/touch");
    expect(notReserved.status).toBe(409);
    expect(notReserved.json.error).toMatchObject({
      code: "not_reserved",
      message: expect.stringMatching(/waiting is delayed, not reserved/),
    });
  });

  it("touch extends the lease, release reschedules, bury sends it dead", async () => {
    const { call, clock, receipt } = await reserved();
    clock.advance(5000);
    const touched = await call("POST", "/v1/jobs/r/touch", { body: { receipt } });
    expect(touched.json.job.reservedUntil).toBe(clock.now + 10_000);
    const released = await call("POST", "/v1/jobs/r/release", { body: { receipt, delay: 2 } });
    expect(released.json.job).toMatchObject({ state: "delayed", dueAt: clock.now + 2000 });
    clock.advance(2000);
    const again = await call("POST", "/v1/topics/t/pop");
    const buried = await call("POST", "/v1/jobs/r/bury", {
      body: { receipt: again.json.jobs[0].receipt },
    });
    expect(buried.json.job).toMatchObject({ state: "dead", deadReason: "buried", attempts: 2 });
  });

  it("rejects unknown fields and bad types in their bodies", async () => {
    const { call } = await reserved();
    const res = await call("POST", "/v1/jobs/r/release", { body: { delay: "soon" } });
    expect(res.status).toBe(400);
    expect(res.json.error.message).toMatch(/delay/);
    const extra = await call("POST", "/v1/jobs/r/finish", { body: { receipt: "x", force: true } });
    expect(extra.json.error.message).toMatch(/unknown field "force"/);
  });
});

describe("POST /v1/jobs/finish", () => {
  it("finishes what one pop gave, one result per item, a refused item leaving the others finished", async () => {
    const { call } = testApp();
    for (const id of ["a", "b", "c"]) await call("POST", "/v1/jobs", { body: { topic: "t", id } });
    const pop = await call("POST", "/v1/topics/t/pop", { body: { count: 3 } });
    const [a, b, c] = pop.json.jobs as { id: string; receipt: string }[];
    const res = await call("POST", "/v1/jobs/finish", {
      body: {
        jobs: [
          { id: a?.id, receipt: a?.receipt },
          { id: b?.id, receipt: "p9.x" },
          { id: c?.id },
          { id: "nope" },
          { id: "a", reciept: a?.receipt },
          // Job-shaped, as pop gave it, with the receipt misspelt: still refused.
          { ...b, receipt: undefined, reciept: b?.receipt },
        ],
      },
    });
    expect(res.status).toBe(200);
    expect(res.json.results).toEqual([
      { finished: true },
      { error: { code: "stale_receipt", message: expect.stringMatching(/not job b's current/) } },
      { finished: true },
      { error: { code: "job_not_found", message: expect.stringMatching(/nope does not exist/) } },
      {
        error: {
          code: "invalid_request",
          message: expect.stringMatching(/jobs\.4.*unknown field "reciept"/),
        },
      },
      {
        error: {
          code: "invalid_request",
          message: expect.stringMatching(/jobs\.5: unknown fields .*"reciept"/),
        },
      },
    ]);
    expect((await call("GET", "/v1/jobs/a")).json.job.state).toBe("finished");
    expect((await call("GET", "/v1/jobs/b")).json.job.state).toBe("reserved");
  });

  it("answers 400 for no jobs, over 100, or a body of the wrong shape", async () => {
    const { call } = testApp();
    for (const body of [
      { jobs: [] },
      { jobs: Array.from({ length: 101 }, (_, i) => ({ id: `j${i}` })) },
      { ids: ["a"] },
    ]) {
      const res = await call("POST", "/v1/jobs/finish", { body });
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe("invalid_request");
      expect(res.json.error.message).toMatch(/jobs/);
    }
    const list = await call("POST", "/v1/jobs/finish", { body: [{ id: "a" }] });
    expect(list.status).toBe(400);
    // Said once, not "Invalid request body: request body: Invalid input: expected object, ...".
    expect(list.json.error.message).toBe("Invalid request body: expected object, received array");
  });
});

describe("POST /v1/topics/{topic}/pop with finish", () => {
  it("finishes the jobs given, then pops: one result per item beside the jobs", async () => {
    const { call } = testApp();
    for (const id of ["a", "b"]) await call("POST", "/v1/jobs", { body: { topic: "t", id } });
    const first = await call("POST", "/v1/topics/t/pop", { body: {} });
    expect(first.json).toEqual({ jobs: [expect.objectContaining({ id: "a" })] });
    const [a] = first.json.jobs as { id: string; receipt: string }[];
    const next = await call("POST", "/v1/topics/t/pop", {
      body: { finish: [{ id: a?.id, receipt: a?.receipt }, { id: "nope" }, { id: 7 }] },
    });
    expect(next.status).toBe(200);
    expect(next.json.jobs.map((job: { id: string }) => job.id)).toEqual(["b"]);
    expect(next.json.finished).toEqual([
      { finished: true },
      { error: { code: "job_not_found", message: expect.stringMatching(/nope does not exist/) } },
      { error: { code: "invalid_request", message: expect.stringMatching(/finish\.2/) } },
    ]);
    expect((await call("GET", "/v1/jobs/a")).json.job.state).toBe("finished");
    const [b] = next.json.jobs as { id: string; receipt: string }[];
    const last = await call("POST", "/v1/topics/t/pop", { body: { finish: [b] } });
    expect(last.json).toEqual({ jobs: [], finished: [{ finished: true }] });
  });

  it("refuses more than 100 jobs to finish, or a finish that is not a list, and finishes none", async () => {
    const { call } = testApp();
    await call("POST", "/v1/jobs", { body: { topic: "t", id: "a" } });
    const [a] = (await call("POST", "/v1/topics/t/pop", { body: {} })).json.jobs;
    for (const finish of [Array.from({ length: 101 }, () => a), { id: "a" }]) {
      const res = await call("POST", "/v1/topics/t/pop", { body: { finish } });
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe("invalid_request");
      expect(res.json.error.message).toMatch(/finish/);
    }
    expect((await call("GET", "/v1/jobs/a")).json.job.state).toBe("reserved");
  });
});
