// The TS client's reschedule and promote, and release's and bury's error, against the real app.
import { describe, expect, it } from "vitest";
import { failureText } from "../../src/client/worker";
import { BASE, setup } from "./support";

describe("reschedule and promote", () => {
  it("send the new due time and answer the job", async () => {
    const { t, client, sent } = setup();
    await client.add({ topic: "t", id: "j", delay: 60 });
    const later = await client.reschedule("j", { delay: 120 });
    expect(later).toMatchObject({ id: "j", state: "delayed", dueAt: t.clock.now + 120_000 });
    expect(sent[1]).toMatchObject({
      method: "POST",
      url: `${BASE}/v1/jobs/j/reschedule`,
      body: { delay: 120 },
    });
    const at = "2027-01-15T18:00:00+08:00";
    expect((await client.reschedule("j", { runAt: at })).dueAt).toBe(Date.parse(at));
    expect(await client.promote("j")).toMatchObject({ state: "ready", dueAt: t.clock.now });
    expect(sent[3]).toMatchObject({ method: "POST", url: `${BASE}/v1/jobs/j/promote` });
    await expect(client.promote("j")).rejects.toMatchObject({
      status: 409,
      code: "invalid_state",
    });
    await expect(client.reschedule("j", { runAt: 1_800_000_000 })).rejects.toMatchObject({
      status: 400,
      code: "invalid_request",
      message: expect.stringMatching(/runAt: must be unix milliseconds/),
    });
  });
});

describe("failure reasons", () => {
  it("release and bury send error, and the job reads it as lastError", async () => {
    const { t, client } = setup();
    await client.add({ topic: "t", id: "j" });
    await client.pop("t");
    const released = await client.release("j", { error: "timeout talking to the bank" });
    expect(released.lastError).toEqual({
      message: "timeout talking to the bank",
      at: t.clock.now,
      attempt: 1,
    });
    const [job] = await client.pop("t");
    const buried = await client.bury("j", { receipt: job?.receipt, error: "fraud check" });
    expect(buried).toMatchObject({
      state: "dead",
      lastError: { message: "fraud check", attempt: 2 },
    });
  });

  it("the worker's release error is the handler's message, cut to 1 KiB", () => {
    expect(failureText(new Error("declined"))).toBe("declined");
    expect(failureText("plain")).toBe("plain");
    const long = failureText(new Error("é".repeat(600)));
    expect(new TextEncoder().encode(long).length).toBeLessThanOrEqual(1024);
    expect(long.endsWith("…")).toBe(true);
  });
});
