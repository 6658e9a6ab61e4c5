// The RESP2 parser: replies split anywhere across chunks come out whole and in order.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeCommand, type Reply, RespParser } from "../../dev/resp";

const wire = Buffer.concat([
  Buffer.from("+OK\r\n-ERR bad thing\r\n:-42\r\n$-1\r\n*-1\r\n"),
  Buffer.from(`$${Buffer.byteLength("ü\r\nx€")}\r\n`),
  Buffer.from("ü\r\nx€", "utf8"),
  Buffer.from("\r\n*3\r\n:1\r\n*2\r\n$1\r\na\r\n$0\r\n\r\n+QUEUED\r\n"),
]);

const expected: Reply[] = [
  { type: "status", value: Buffer.from("OK") },
  { type: "error", message: "ERR bad thing" },
  { type: "integer", value: -42 },
  { type: "bulk", value: null },
  { type: "array", value: null },
  { type: "bulk", value: Buffer.from("ü\r\nx€", "utf8") },
  {
    type: "array",
    value: [
      { type: "integer", value: 1 },
      {
        type: "array",
        value: [
          { type: "bulk", value: Buffer.from("a") },
          { type: "bulk", value: Buffer.from("") },
        ],
      },
      { type: "status", value: Buffer.from("QUEUED") },
    ],
  },
];

describe("RespParser", () => {
  it("parses every reply type from one chunk", () => {
    expect(new RespParser().push(wire)).toEqual(expected);
  });

  it("gives the same replies however the bytes are cut", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: wire.length - 1 })), (cuts) => {
        const parser = new RespParser();
        const points = [0, ...cuts.sort((a, b) => a - b), wire.length];
        const replies: Reply[] = [];
        for (let i = 1; i < points.length; i++) {
          replies.push(...parser.push(wire.subarray(points[i - 1], points[i])));
        }
        expect(replies).toEqual(expected);
      }),
    );
  });

  it("encodes commands as arrays of bulk strings, byte lengths counted", () => {
    expect(encodeCommand(["SET", "k", "é"]).toString("utf8")).toBe(
      "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\né\r\n",
    );
  });

  it("rejects a byte that starts no reply type", () => {
    expect(() => new RespParser().push(Buffer.from("?what\r\n"))).toThrow(/protocol error/);
  });
});
