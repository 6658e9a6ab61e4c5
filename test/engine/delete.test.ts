// Deleting jobs in every state: gone for good, idempotent, unknown ids not found.
import { describe, expect, it } from "vitest";
import { expectError } from "../support/expect";
import { testQueue } from "../support/queue";

describe("delete", () => {
  it("deletes a job in any state, and it is never handed out afterwards", async () => {
    const { queue, clock } = testQueue();
    await queue.add({ topic: "t", id: "delayed", delay: 5 });
    await queue.add({ topic: "t", id: "ready" });
    await queue.add({ topic: "t", id: "reserved" });
    await queue.add({ topic: "t", id: "dead" });
    await queue.pop("t", { count: 1 }); // "ready" ... takes the earliest due
    const reserved = await queue.list("t", { state: "reserved" });
    const heldId = reserved.jobs[0]?.id as string;
    await queue.pop("t", { count: 1 });
    const [other] = (await queue.list("t", { state: "reserved" })).jobs.filter(
      (j) => j.id !== heldId,
    );
    await queue.bury(other?.id as string);
    for (const id of ["delayed", "ready", "reserved", "dead"]) await queue.delete(id);
    expect((await queue.get("delayed")).state).toBe("deleted");
    clock.advance(10_000);
    expect(await queue.pop("t", { count: 100 })).toEqual([]);
    await expectError(queue.finish(heldId), "not_reserved", /deleted/);
    expect((await queue.topic("t")).counts).toEqual({ delayed: 0, ready: 0, reserved: 0, dead: 0 });
  });

  it("ends a reservation: its receipt is then stale, and says the job was deleted", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "held-by-pop" });
    const [popped] = await queue.pop("t");
    await queue.delete("held-by-pop");
    for (const verb of ["finish", "touch", "release", "bury"] as const) {
      await expectError(
        queue[verb]("held-by-pop", { receipt: popped?.receipt }),
        "stale_receipt",
        /was deleted/,
      );
    }
  });

  it("is idempotent, and unknown ids are not found", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    await queue.delete("j");
    await queue.delete("j");
    await expectError(queue.delete("nope"), "job_not_found");
  });
});
