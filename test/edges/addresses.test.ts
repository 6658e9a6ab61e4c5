// What a network error says reaches a payment watch's answer (its last poll): the gateway's or a
// proxy's address it may quote is left out there; the reason stays readable.
import { describe, expect, it } from "vitest";
import { withoutAddresses } from "../../src/domain/errors";
import { fetchText } from "../../src/payments/provider";

describe("withoutAddresses", () => {
  it.each([
    [
      "fetch failed (connect ECONNREFUSED 127.0.0.1:6379)",
      "fetch failed (connect ECONNREFUSED <address>)",
    ],
    [
      "Fetch API cannot load: http://10.0.3.7:8080/gateway.do?x=1",
      "Fetch API cannot load: <address>",
    ],
    ["connect ECONNREFUSED ::1:443", "connect ECONNREFUSED <address>"],
    ["connect ETIMEDOUT [fd00::2]:443", "connect ETIMEDOUT <address>"],
    ["getaddrinfo ENOTFOUND gw.internal.example:8443", "getaddrinfo ENOTFOUND <address>"],
    ["socket hang up at localhost:9000", "socket hang up at <address>"],
    ["timeout after 500 ms at 12:30", "timeout after 500 ms at 12:30"],
    [
      "ACQ.SYSTEM_ERROR: 20000 Service Currently Unavailable",
      "ACQ.SYSTEM_ERROR: 20000 Service Currently Unavailable",
    ],
  ])("%s", (text, left) => {
    expect(withoutAddresses(text)).toBe(left);
  });
});

describe("a provider call that fails on the network", () => {
  it("is a reason naming no address (workerd's fetch quotes the URL)", async () => {
    const url = "http://10.0.3.7:8080/gateway.do?out_trade_no=o-1";
    const fetched = await fetchText(
      url,
      { method: "POST" },
      {
        fetch: async (input) => {
          throw new TypeError(`Fetch API cannot load: ${String(input)}`);
        },
      },
    );
    expect(fetched).toEqual({
      ok: false,
      reason: "network error: Fetch API cannot load: <address>",
    });
  });
});
