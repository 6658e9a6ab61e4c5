// The record codec and the receipt's parts as Redis runs them (src/redis/record.ts,
// src/redis/lua/lib/transitions.ts), checked against implementations written here on their own:
// the TS decoder of the record format, Number#toString(36), and djb2 over the id's bytes. Both
// Lua sides read four bytes or two digits a step, so lengths and sizes around those steps are
// covered one by one.
import { describe, expect, it } from "vitest";
import { LUA_LIB } from "../../src/redis/lua/lib";
import { libraryFor, statementsOf } from "../../src/redis/lua/lib/shake";
import { decodeMeta, decodeRecord, errorField } from "../../src/redis/record";
import { popReceipt } from "../support/queue";
import { testRedis } from "../support/redis";

const { redis, prefix } = testRedis({ automaticDeserialization: false });
const statements = statementsOf(LUA_LIB);

/** Runs `body` after the part of the library it calls, as every script does. */
function run(body: string, args: string[]): Promise<unknown> {
  const script = `${libraryFor(statements, body)}\n${body}`;
  return redis.eval(script, [`${prefix}k`], [prefix, String(Date.now()), "60000", ...args]);
}

const ID_CHARS = "ABCXYZabcxyz0189_.:@~+=-";
const idOf = (length: number, seed: number) =>
  Array.from({ length }, (_, i) => ID_CHARS[(seed * 7 + i * 13) % ID_CHARS.length]).join("");

describe("a pop's receipt, as Redis derives it", () => {
  it("hashes ids of every length from 1 to 40, and 128, as djb2 over their bytes", async () => {
    const ids = [...Array.from({ length: 40 }, (_, i) => idOf(i + 1, i)), idOf(128, 3)];
    // A multi-byte id too (ids are ASCII today; the hash is over bytes either way).
    ids.push("订单-42", "pay:wechatpay:shop-a:order-1");
    const receipts = await run(
      `local out = {}
      for i = 4, #ARGV do
        out[#out + 1] = popReceipt({attempts = 0, due = 1795877446682, createdAt = 1795877440000, id = ARGV[i]})
      end
      return out`,
      ids,
    );
    expect(receipts).toEqual(ids.map((id) => popReceipt(1, 1795877446682, 1795877440000, id)));
  });

  it("writes numbers in base 36 around every digit and pair boundary", async () => {
    const numbers = [
      0,
      1,
      35,
      36,
      37,
      1295,
      1296,
      1297,
      36 ** 3 - 1,
      36 ** 3,
      36 ** 4 - 1,
      36 ** 4,
    ];
    numbers.push(36 ** 5, 36 ** 6 - 1, 2 ** 32 - 1, 1_795_877_446_682, 36 ** 8, 2 ** 53 - 1);
    const written = await run(
      `local out = {}
      for i = 4, #ARGV do out[#out + 1] = base36(tonumber(ARGV[i])) end
      out[#out + 1] = base36(-1296)
      out[#out + 1] = base36(12.9)
      return out`,
      numbers.map(String),
    );
    expect(written).toEqual([...numbers.map((n) => n.toString(36)), "-100", "c"]);
  });
});

describe("a record's meta, as Redis decodes it", () => {
  const records = [
    // Every field set; the backoff holds "|", the body "|" and line breaks.
    'r|order-1|pay|1795877446682|1795877440000|30000|2|10|1795877999999|1795877476682|p2.x.y.z|1795877500000|attempts|503|1795877450000|Service Unavailable|msg_1|{"type":"exponential","delay":1,"note":"a|b"}\n{"x":"1|2\\n3"}\nmore',
    // Only what every record has: the other fields empty, no backoff, an empty body.
    "w|j|t|1|0|1000|0|1||||||||||\n",
    "f|pay:a:b|__payments|1795877446682|1795877440000|60000|1|8|||p1.a.b.c|1795877447000||||||\nnull",
  ];

  it("reads every field as the TS decoder does, and gives the body back as stored", async () => {
    const decoded = (await run(
      `local out = {}
      for i = 4, #ARGV do
        local meta, body = decode(ARGV[i])
        out[#out + 1] = cjson.encode(meta)
        out[#out + 1] = body
        out[#out + 1] = encode(meta) .. "\\n" .. body
      end
      return out`,
      records,
    )) as string[];
    records.forEach((raw, i) => {
      const cut = raw.indexOf("\n");
      const meta = decodeMeta(raw.slice(0, cut));
      const lua = JSON.parse(decoded[3 * i] as string);
      // The TS decoder parses the backoff; Lua keeps its text.
      const backoffText = raw.slice(0, cut).split("|").slice(17).join("|");
      expect({ ...lua, backoff: lua.backoff && JSON.parse(lua.backoff) }).toEqual(
        JSON.parse(JSON.stringify(meta)),
      );
      if (backoffText) expect(lua.backoff).toBe(backoffText);
      expect(decoded[3 * i + 1]).toBe(raw.slice(cut + 1));
      // Re-encoded, the record is the same bytes.
      expect(decoded[3 * i + 2]).toBe(raw);
    });
  });

  it("refuses a record not in delayq's format with an error saying so", async () => {
    await expect(run("return decode(ARGV[4])", ["w|j|t|1\n{}"])).rejects.toThrow(
      /a job record in Redis is not in delayq's format/,
    );
  });
});

describe("a job's lastError, as the record keeps it", () => {
  // state, id, topic, due, created, ttr, attempts, max, deadline, lease end, receipt, ended, why
  // dead, last status, last at, last error, message id; then the backoff.
  const meta = (lastError: string, lastAt = "") =>
    `w|e1|t|1800000005000|1800000000000|30000|2|10||||||503|${lastAt}|${lastError}||`;

  it("reads `<at>:<attempt>:<message>`, the message unescaped, whatever it holds", () => {
    const message = "100% | declined\r\nline two %7C";
    const raw = `${meta(`1800000003000:2:${errorField(message)}`)}\n{}`;
    expect(errorField(message)).not.toMatch(/[|\r\n]/);
    expect(decodeRecord(raw, 1800000004000).lastError).toEqual({
      message,
      at: 1800000003000,
      attempt: 2,
    });
  });

  it("reads an earlier version's bare delivery error as the last delivery's, and as lastError", () => {
    const job = decodeRecord(`${meta("HTTP 503", "1800000003000")}\n{}`, 1800000004000);
    expect(job.lastDelivery).toEqual({ status: 503, at: 1800000003000, error: "HTTP 503" });
    expect(job.lastError).toEqual({ message: "HTTP 503", at: 1800000003000, attempt: 2 });
  });

  it("gives lastDelivery the error only when it is that delivery's (its time and attempt)", () => {
    const earlier = decodeRecord(
      `${meta("1800000001000:1:HTTP 500", "1800000003000")}\n{}`,
      1800000004000,
    );
    expect(earlier.lastDelivery).toEqual({ status: 503, at: 1800000003000 });
    expect(earlier.lastError).toEqual({ message: "HTTP 500", at: 1800000001000, attempt: 1 });
  });
});
