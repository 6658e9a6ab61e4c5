// Changing a waiting job's due time (reschedule, promote), through the public API.
import { describe, expect, it } from "vitest";
import { tick } from "../../src/index";
import { expectError } from "../support/expect";
import { SLOT_OPENS, slotOf, testQueue } from "../support/queue";

describe("reschedule", () => {
  it("moves a delayed job later: nothing at its old time, handed out at its new one", async () => {
    const { queue, clock } = testQueue();
    const start = clock.now;
    await queue.add({ topic: "t", id: "j", delay: 10, body: { n: 1 } });
    const job = await queue.reschedule("j", { delay: 30 });
    expect(job).toMatchObject({ state: "delayed", dueAt: start + 30_000, attempts: 0 });
    expect(job.body).toEqual({ n: 1 });
    clock.advance(10_000);
    await tick(queue);
    expect(await queue.pop("t")).toEqual([]);
    clock.advance(19_999);
    await tick(queue);
    expect(await queue.pop("t")).toEqual([]);
    clock.advance(1);
    await tick(queue);
    expect((await queue.pop("t")).map((j) => j.id)).toEqual(["j"]);
  });

  it("moves a delayed job earlier, and a runAt already past makes it due now", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "a", delay: 600 });
    await queue.add({ topic: "t", id: "b", delay: 600 });
    expect(await queue.reschedule("a", { runAt: clock.now + 5000 })).toMatchObject({
      state: "delayed",
      dueAt: clock.now + 5000,
    });
    const past = clock.now - 3_600_000;
    expect(await queue.reschedule("b", { runAt: new Date(past).toISOString() })).toMatchObject({
      state: "ready",
      dueAt: past,
    });
    expect((await queue.pop("t", { count: 10 })).map((j) => j.id)).toEqual(["b"]);
    clock.advance(5000);
    expect((await queue.pop("t", { count: 10 })).map((j) => j.id)).toEqual(["a"]);
  });

  it("sends a ready job back to waiting", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    expect((await queue.get("j")).state).toBe("ready");
    await queue.reschedule("j", { delay: 60 });
    expect((await queue.topic("t")).counts).toMatchObject({ ready: 0, delayed: 1 });
    expect(await queue.pop("t")).toEqual([]);
    clock.advance(60_000);
    expect((await queue.pop("t")).map((j) => j.id)).toEqual(["j"]);
  });

  it("keeps attempts, receipts' history and body: a job released once is rescheduled as it is", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", body: "x", maxAttempts: 3 });
    await queue.pop("t");
    await queue.release("j", { delay: 10 });
    const job = await queue.reschedule("j", { delay: 100 });
    expect(job).toMatchObject({ attempts: 1, maxAttempts: 3, body: "x", state: "delayed" });
    clock.advance(100_000);
    await tick(queue);
    expect(await queue.pop("t")).toMatchObject([{ id: "j", attempts: 2 }]);
  });

  it("takes a far job out of its slot list: handed out once, at its new time", async () => {
    const { queue, clock, redis, keys } = testQueue({ partitions: 1 });
    const start = clock.now;
    await queue.add({ topic: "t", id: "far", delay: 3600 });
    expect(await redis.get(keys.slotted("t"))).toBe("1");
    await queue.reschedule("far", { delay: 20 });
    expect(await redis.get(keys.slotted("t"))).toBe("0");
    expect((await queue.topic("t")).counts.delayed).toBe(1);
    clock.advance(20_000);
    await tick(queue);
    expect((await queue.pop("t")).map((j) => j.id)).toEqual(["far"]);
    await queue.finish("far");
    // The slot the job was listed in opens: its stale entry hands nothing out.
    clock.set(slotOf(start + 3_600_000) - SLOT_OPENS + 1);
    await tick(queue);
    clock.set(start + 3_600_000);
    await tick(queue);
    expect(await queue.pop("t")).toEqual([]);
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
  });

  it("moves a job into a far slot and within its own slot, never early, never twice", async () => {
    const { queue, clock } = testQueue();
    const start = clock.now;
    await queue.add({ topic: "t", id: "near", delay: 30 });
    await queue.add({ topic: "t", id: "same", delay: 3600 });
    await queue.reschedule("near", { delay: 7200 });
    // Due 10 s later, in the same slot list it already sits in: listed twice, moved once.
    const sameDue = slotOf(start + 3_600_000) + 20_000;
    await queue.reschedule("same", { runAt: sameDue });
    expect((await queue.topic("t")).counts.delayed).toBe(2);
    const handed: string[] = [];
    for (let at = start; at <= start + 7_300_000; at += 60_000) {
      clock.set(at);
      await tick(queue);
      for (const job of await queue.pop("t", { count: 10 })) {
        expect(job.dueAt).toBeLessThanOrEqual(at);
        handed.push(job.id);
        await queue.finish(job.id);
      }
      if (handed.includes("same") && at < sameDue) throw new Error("same came early");
    }
    expect(handed.sort()).toEqual(["near", "same"]);
  });

  it("refuses a job that is not delayed or ready with invalid_state, changing nothing", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "held" });
    await queue.pop("t");
    await expectError(
      queue.reschedule("held", { delay: 5 }),
      "invalid_state",
      /held is reserved: only a delayed or ready job can be rescheduled/,
    );
    expect(await queue.get("held")).toMatchObject({ state: "reserved", attempts: 1 });
    await queue.finish("held");
    await expectError(queue.reschedule("held", { delay: 5 }), "invalid_state", /is finished/);
    await queue.add({ topic: "t", id: "dead" });
    await queue.pop("t");
    await queue.bury("dead");
    await expectError(queue.reschedule("dead", { delay: 5 }), "invalid_state", /is dead/);
    await queue.add({ topic: "t", id: "gone", delay: 5 });
    await queue.delete("gone");
    await expectError(queue.reschedule("gone", { delay: 5 }), "invalid_state", /is deleted/);
    await expectError(queue.reschedule("never", { delay: 5 }), "job_not_found");
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 1 });
  });

  it("answers a job of a topic outside the token's scope as missing", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "secret", id: "s", delay: 60 });
    const limited = queue.withScope(["public*"]);
    await expectError(limited.reschedule("s", { delay: 5 }), "job_not_found");
    await expectError(limited.promote("s"), "job_not_found");
    expect((await queue.get("s")).state).toBe("delayed");
  });

  it("refuses bad times with invalid_request naming the field", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", delay: 60, deadline: clock.now + 120_000 });
    const year = 365 * 24 * 3600 * 1000;
    await expectError(
      queue.reschedule("j", { runAt: clock.now + year + 1000 }),
      "invalid_request",
      /^runAt: must be at most a year from now/,
    );
    await expectError(
      queue.reschedule("j", { runAt: Math.floor(clock.now / 1000) + 60 }),
      "invalid_request",
      /runAt: must be unix milliseconds, and \d+ looks like seconds/,
    );
    await expectError(queue.reschedule("j", { delay: -1 }), "invalid_request", /delay/);
    await expectError(
      queue.reschedule("j", { delay: 5, runAt: clock.now + 5000 }),
      "invalid_request",
      /runAt: give either delay or runAt, not both/,
    );
    await expectError(queue.reschedule("j", {}), "invalid_request", /delay: give the new due time/);
    await expectError(
      queue.reschedule("j", { delay: 300 }),
      "invalid_request",
      /^delay: must not be after job j's deadline \(2027-01-15T08:02:00.000Z\)/,
    );
    expect((await queue.get("j")).dueAt).toBe(clock.now + 60_000);
  });
});

describe("promote", () => {
  it("makes a delayed job ready now, wherever it waits", async () => {
    const { queue, clock, redis, keys } = testQueue({ partitions: 1 });
    await queue.add({ topic: "t", id: "near", delay: 30 });
    await queue.add({ topic: "t", id: "far", delay: 86_400 });
    expect(await queue.promote("near")).toMatchObject({ state: "ready", dueAt: clock.now });
    expect(await queue.promote("far")).toMatchObject({ state: "ready", dueAt: clock.now });
    expect(await redis.get(keys.slotted("t"))).toBe("0");
    const popped = await queue.pop("t", { count: 10 });
    expect(popped.map((j) => j.id).sort()).toEqual(["far", "near"]);
    for (const job of popped) await queue.finish(job.id);
    clock.advance(86_400_000);
    await tick(queue);
    expect(await queue.pop("t", { count: 10 })).toEqual([]);
  });

  it("refuses a job already due, or not waiting, with invalid_state", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "ready" });
    await expectError(
      queue.promote("ready"),
      "invalid_state",
      /ready is ready: only a delayed job can be promoted: it is due already/,
    );
    await queue.add({ topic: "t", id: "due", delay: 5 });
    clock.advance(5000);
    // Due, though no tick has moved it yet: it reads ready, and is refused as such.
    await expectError(queue.promote("due"), "invalid_state", /due is ready/);
    const [held] = await queue.pop("t");
    await expectError(queue.promote(held?.id ?? ""), "invalid_state", /is reserved/);
    await expectError(queue.promote("nope"), "job_not_found");
  });

  it("wakes a consumer long-polling the topic", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "j", delay: 3600 });
    const waiting = queue.pop("t", { wait: 5 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await queue.promote("j");
    expect((await waiting).map((j) => j.id)).toEqual(["j"]);
  });
});

describe("failure reasons", () => {
  it("release and bury keep their error as lastError {message, at, attempt}", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "j", maxAttempts: 5 });
    await queue.pop("t");
    const message = "card declined | code 51\nline two, 100% sure";
    const released = await queue.release("j", { error: message });
    expect(released.lastError).toEqual({ message, at: clock.now, attempt: 1 });
    clock.advance(1000);
    await queue.pop("t");
    // Released without an error: the last one stays.
    expect((await queue.release("j")).lastError).toEqual({
      message,
      at: clock.now - 1000,
      attempt: 1,
    });
    clock.advance(1000);
    await queue.pop("t");
    const buried = await queue.bury("j", { error: "gave up: %7C" });
    expect(buried.lastError).toEqual({ message: "gave up: %7C", at: clock.now, attempt: 3 });
    expect((await queue.get("j")).lastError).toEqual(buried.lastError);
    const [dead] = (await queue.list("t", { state: "dead" })).jobs;
    expect(dead?.lastError).toEqual(buried.lastError);
  });

  it("a job that never failed with an error has no lastError", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    await queue.pop("t");
    expect((await queue.release("j")).lastError).toBeUndefined();
    expect((await queue.get("j")).lastError).toBeUndefined();
  });

  it("refuses an error over 1 KiB (UTF-8) with invalid_request, changing nothing", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    await queue.pop("t");
    await queue.release("j", { error: "é".repeat(512) });
    await queue.pop("t");
    await expectError(
      queue.release("j", { error: "é".repeat(513) }),
      "invalid_request",
      /error: must be at most 1024 bytes/,
    );
    await expectError(queue.bury("j", { error: "x".repeat(1025) }), "invalid_request", /error/);
    await expectError(queue.bury("j", { error: "" }), "invalid_request", /error/);
    expect(await queue.get("j")).toMatchObject({ state: "reserved", attempts: 2 });
  });
});
