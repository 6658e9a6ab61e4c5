// Topic scopes: a view of the queue limited to some topics cannot read or change any other.
import { describe, expect, it } from "vitest";
import { scopeAllows, scopeToLua } from "../../src/domain/scope";
import { DelayqError } from "../../src/index";
import { testQueue } from "../support/queue";

async function code(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => "ok",
    (error: unknown) => (error instanceof DelayqError ? error.code : String(error)),
  );
}

describe("scope patterns", () => {
  it("matches * as any run of characters and everything else literally", () => {
    expect(scopeAllows(["orders-*"], "orders-eu")).toBe(true);
    expect(scopeAllows(["orders-*"], "orders")).toBe(false);
    expect(scopeAllows(["a.b"], "axb")).toBe(false);
    expect(scopeAllows(["*"], "anything")).toBe(true);
    expect(scopeAllows([], "anything")).toBe(false);
    expect(scopeAllows(undefined, "anything")).toBe(true);
    expect(scopeToLua(["a.b-*", "x"])).toBe("^a%.b%-.*$\n^x$");
  });
});

describe("a scoped queue", () => {
  it("acts on its topics and nothing else", async () => {
    const { queue } = testQueue();
    const scoped = queue.withScope(["shop-a.*"]);
    await queue.add({ topic: "shop-b.orders", id: "theirs", body: "secret" });
    const [mine] = await scoped.addBatch([{ topic: "shop-a.orders", id: "mine" }]);
    expect(mine).toMatchObject({ created: true });

    expect(await code(scoped.add({ topic: "shop-b.orders", id: "x" }))).toBe("forbidden");
    expect(await scoped.addBatch([{ topic: "shop-b.orders" }])).toEqual([
      { error: { code: "forbidden", message: expect.stringContaining("shop-b.orders") } },
    ]);
    expect(await code(scoped.pop("shop-b.orders"))).toBe("forbidden");
    expect(await code(scoped.get("theirs"))).toBe("job_not_found");
    expect(await code(scoped.kick("shop-b.orders"))).toBe("forbidden");
    expect(await code(scoped.list("shop-b.orders", { state: "ready" }))).toBe("forbidden");
    expect(await code(scoped.topic("shop-b.orders"))).toBe("forbidden");
    expect(await code(scoped.configure("shop-b.orders", { paused: true }))).toBe("forbidden");

    // By id, the scripts check the job's topic in the same request; a job out of scope reads
    // as missing, so that a token cannot tell whether an id exists elsewhere (issue 8.14).
    await queue.pop("shop-b.orders");
    for (const op of [
      () => scoped.finish("theirs"),
      () => scoped.touch("theirs"),
      () => scoped.release("theirs"),
      () => scoped.bury("theirs"),
      () => scoped.delete("theirs"),
    ]) {
      expect(await code(op())).toBe("job_not_found");
    }
    expect(await queue.get("theirs")).toMatchObject({ state: "reserved", attempts: 1 });

    const { topics } = await scoped.topics();
    expect(topics.map((t) => t.topic)).toEqual(["shop-a.orders"]);
    expect((await scoped.pop("shop-a.orders")).map((j) => j.id)).toEqual(["mine"]);
    await scoped.finish("mine");
  });

  it("allows nothing with an empty scope", async () => {
    const { queue } = testQueue();
    await queue.add({ topic: "t", id: "j" });
    const none = queue.withScope([]);
    expect(await code(none.delete("j"))).toBe("job_not_found");
    expect(await code(none.pop("t"))).toBe("forbidden");
  });
});
