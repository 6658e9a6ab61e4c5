// Big batches: split into Redis requests by their bytes on the wire, whatever the text's script.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { mostWireBytes } from "../../src/queue/add-batch";
import { testQueue } from "../support/queue";

describe("mostWireBytes", () => {
  it("is never below the bytes the fields take as JSON strings in UTF-8, each with a comma", () => {
    // Any UTF-16 code units: control characters, quotes, lone surrogates and pairs included.
    const field = fc.string({ unit: "binary" });
    fc.assert(
      fc.property(fc.array(fc.array(field, { maxLength: 9 }), { maxLength: 5 }), (prepared) => {
        const exact = prepared
          .flat()
          .reduce((sum, f) => sum + new TextEncoder().encode(JSON.stringify(f)).length + 1, 0);
        expect(mostWireBytes(prepared)).toBeGreaterThanOrEqual(exact);
      }),
      { numRuns: 500 },
    );
    // The bound is reached: each of these takes 6 bytes as JSON (\u0001, \ud800).
    expect(mostWireBytes([["\u0001\ud800"]])).toBe(
      new TextEncoder().encode(JSON.stringify("\u0001\ud800")).length + 1,
    );
  });
});

describe("addBatch of big bodies", () => {
  it("adds 9.7 MiB of Chinese text in one batch, split below Upstash's 10 MB per request (issue 8.4)", async () => {
    const t = testQueue();
    // Just under 256 KiB of JSON each (the body limit): Chinese at 3 bytes per character, and
    // quotes that the REST request escapes once more. 39 bodies are about 4 M characters, which a
    // count of characters put in one request, but over 10 MiB on the wire.
    const words = Array.from({ length: 7940 }, () => "支付宝订单状态查询中");
    const jobs = Array.from({ length: 39 }, (_, n) => ({
      topic: "big",
      id: `big-${n}`,
      body: words,
    }));
    const before = (await t.stats()).requests.total;
    const results = await t.queue.addBatch(jobs);
    expect(results.every((result) => "created" in result && result.created)).toBe(true);
    const requests = (await t.stats()).requests.total - before;
    expect(requests).toBeGreaterThanOrEqual(3); // ~9.7 MiB over 4 MiB pieces
    const stored = await t.queue.get("big-38");
    expect(stored.body).toEqual(words);
  });
});
