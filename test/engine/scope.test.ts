// Topic scopes: a view of the queue limited to some topics cannot read or change any other.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { scopeAllows, scopeRanges, scopeToLua } from "../../src/domain/scope";
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

describe("scope ranges", () => {
  const name = fc.stringMatching(/^[ab_.:-]{1,4}$/);
  const pattern = fc.oneof(
    name,
    name.map((n) => `${n}*`),
    fc.constant("*"),
  );

  it("hold exactly the names a scope of names and prefixes allows, sorted and apart", () => {
    fc.assert(
      fc.property(fc.array(pattern, { maxLength: 5 }), fc.array(name), (scope, names) => {
        const ranges = scopeRanges(scope) as [string, string][];
        for (const [i, [from, to]] of ranges.entries()) {
          expect(from < to).toBe(true);
          if (i > 0) expect((ranges[i - 1] as [string, string])[1] <= from).toBe(true);
        }
        for (const topic of names) {
          const within = ranges.some(([from, to]) => from <= topic && topic < to);
          expect(within, `${topic} in ${JSON.stringify(ranges)}`).toBe(scopeAllows(scope, topic));
        }
      }),
      { numRuns: 500 },
    );
  });

  it("are none for a scope with a * anywhere but at the end, nor for every topic", () => {
    expect(scopeRanges(["a.*", "*.x"])).toBeUndefined();
    expect(scopeRanges(["a*b"])).toBeUndefined();
    expect(scopeRanges(undefined)).toBeUndefined();
    expect(scopeRanges([])).toEqual([]);
    expect(scopeRanges(["acme", "acme*", "acme.x"])).toEqual([["acme", "acme\x7f"]]);
  });
});

describe("a scoped queue", () => {
  it("pages its topics within its ranges: where a page ends tells nothing of hidden names", async () => {
    const { queue } = testQueue();
    const hidden = ["a", "b", "bz.y", "c", "c.x", "d.xy", "d.y", "e"];
    const mine = ["b.c", "b.c.d", "ba", "bb", "d.x"];
    for (const topic of [...hidden, ...mine]) await queue.add({ topic, delay: 60 });
    const page = async (scope: string[], limit: number) => {
      const scoped = queue.withScope(scope);
      const pages: string[][] = [];
      let after: string | undefined;
      do {
        const got = await scoped.topics(after === undefined ? { limit } : { after, limit });
        pages.push(got.topics.map((t) => t.topic));
        after = got.cursor;
      } while (after !== undefined && pages.length < 20);
      return pages;
    };
    // Names and prefixes: each page is full, however many hidden names lie between.
    expect(await page(["b.*", "ba", "bb", "d.x"], 2)).toEqual([
      ["b.c", "b.c.d"],
      ["ba", "bb"],
      ["d.x"],
    ]);
    expect(await page(["b*", "d.x"], 1)).toEqual([
      ["b"],
      ["b.c"],
      ["b.c.d"],
      ["ba"],
      ["bb"],
      ["bz.y"],
      ["d.x"],
    ]);
    // Another pattern reads the whole index, hidden names counted in a page's size.
    expect((await page(["*.x"], 3)).flat()).toEqual(["c.x", "d.x"]);
  });

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
