// Which addresses count as non-public, checked against Node's own net.BlockList (an independent
// implementation) over the same ranges, and against golden cases written out by hand.
import { BlockList, isIPv4 } from "node:net";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { destinationPolicy, nonPublicKind, nonPublicUrl } from "../../src/domain/destinations";

/** The ranges, as Node's BlockList sees them (written out here, not imported). */
const blocked = new BlockList();
for (const [base, bits] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  blocked.addSubnet(base, bits, "ipv4");
}
for (const [base, bits] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
  ["64:ff9b:1::", 48],
  ["2001:db8::", 32],
  ["100::", 64],
] as const) {
  blocked.addSubnet(base, bits, "ipv6");
}

const octet = fc.integer({ min: 0, max: 255 });
const ipv4 = fc.tuple(octet, octet, octet, octet).map((o) => o.join("."));
const group = fc.integer({ min: 0, max: 0xffff }).map((g) => g.toString(16));
const ipv6 = fc.array(group, { minLength: 8, maxLength: 8 }).map((g) => g.join(":"));

describe("nonPublicKind", () => {
  it("agrees with net.BlockList on any IPv4 address", () => {
    fc.assert(
      fc.property(
        fc.oneof(ipv4, fc.constantFrom("10.1.2.3", "172.31.255.255", "172.32.0.0", "100.127.0.1")),
        (address) => {
          expect(nonPublicKind(address) !== undefined, address).toBe(
            blocked.check(address, "ipv4"),
          );
        },
      ),
      { numRuns: 5000 },
    );
  });

  it("agrees with net.BlockList on IPv6 addresses outside the embedded-IPv4 forms", () => {
    const embedding = (a: string) => /^(0:){5}(0|ffff):|^64:ff9b:0:0:0:0:|^2002:/.test(a);
    fc.assert(
      fc.property(
        fc.oneof(
          ipv6,
          // the interesting prefixes, with any rest
          fc
            .tuple(
              fc.constantFrom(
                "fc00",
                "fdff",
                "fe80",
                "febf",
                "fec0",
                "ff02",
                "fe7f",
                "fbff",
                "2001:db8",
                "100:0:0:0",
              ),
              ipv6,
            )
            .map(
              ([head, rest]) =>
                `${head}:${rest.split(":").slice(head.split(":").length).join(":")}`,
            ),
        ),
        (address) => {
          if (embedding(address)) return;
          expect(nonPublicKind(address) !== undefined, address).toBe(
            blocked.check(address, "ipv6"),
          );
        },
      ),
      { numRuns: 5000 },
    );
  });

  it("judges an IPv6 address that carries an IPv4 one by that address", () => {
    fc.assert(
      fc.property(ipv4, (v4) => {
        const inner = blocked.check(v4, "ipv4");
        const [a, b, c, d] = v4.split(".").map(Number) as [number, number, number, number];
        const hex = `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
        for (const form of [`::ffff:${v4}`, `::ffff:${hex}`, `64:ff9b::${v4}`, `2002:${hex}::1`]) {
          expect(nonPublicKind(form) !== undefined, form).toBe(inner);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it("names the kind, and reads brackets, zones and compressed forms", () => {
    expect(nonPublicKind("127.0.0.1")).toBe("loopback");
    expect(nonPublicKind("169.254.169.254")).toBe("link-local (cloud metadata)");
    expect(nonPublicKind("[::1]")).toBe("loopback");
    expect(nonPublicKind("::")).toBe("unspecified");
    expect(nonPublicKind("fe80::1%eth0")).toBe("link-local");
    expect(nonPublicKind("[::ffff:7f00:1]")).toBe("loopback");
    expect(nonPublicKind("::ffff:10.0.0.5")).toBe("private");
    expect(nonPublicKind("fd12:3456::1")).toBe("private (unique local)");
    // Documentation ranges: on some machines, this machine's own address (a security pass met
    // 192.0.2.2 as this machine's interface).
    expect(nonPublicKind("192.0.2.2")).toBe("documentation");
    expect(nonPublicKind("2001:db8::1")).toBe("documentation");
    for (const address of [
      "8.8.8.8",
      "[2606:4700::1111]",
      "1.1.1.1",
      "2001:db9::1",
      "example.com",
    ]) {
      expect(nonPublicKind(address), address).toBeUndefined();
    }
    for (const notAnAddress of ["1.2.3", "256.1.1.1", "1:2:3", "::1::2", "g::1", ""]) {
      expect(nonPublicKind(notAnAddress), notAnAddress).toBeUndefined();
    }
  });
});

describe("nonPublicUrl", () => {
  it("reads the host the way fetch will (WHATWG URL: decimal, hex and short IPv4 forms)", () => {
    const cases: [string, string | undefined][] = [
      ["http://127.0.0.1:8080/hook", "127.0.0.1 is a loopback address"],
      ["http://2130706433/", "127.0.0.1 is a loopback address"],
      ["http://0x7f.1/", "127.0.0.1 is a loopback address"],
      ["http://10.1/", "10.0.0.1 is a private address"],
      [
        "http://[::ffff:169.254.169.254]/latest",
        "[::ffff:a9fe:a9fe] is a link-local (cloud metadata) address",
      ],
      ["http://LOCALHOST:3000/", "localhost is this machine"],
      ["http://localhost.:3000/", "localhost is this machine"],
      ["http://evil.example@127.1/", "127.0.0.1 is a loopback address"],
      ["http://0/", "0.0.0.0 is an unspecified address"],
      ["https://api.localhost/", "api.localhost is this machine"],
      ["https://hooks.example.com/delayq", undefined],
      ["https://93.184.216.34/", undefined],
    ];
    for (const [url, why] of cases) expect(nonPublicUrl(url), url).toBe(why);
    // Every address the kind names is refused as a URL too.
    fc.assert(
      fc.property(ipv4, (v4) => {
        expect(nonPublicUrl(`http://${v4}/`) !== undefined).toBe(isIPv4(v4) && blocked.check(v4));
      }),
    );
  });
});

describe("destinationPolicy", () => {
  const scopes = [["shop-a.*", "payments"], ["shop-b.orders"]];
  it("admin (the default): restricts the topics a topic-limited token reaches, no others", () => {
    const policy = destinationPolicy("admin", scopes);
    expect(policy.restricted("shop-a.orders")).toBe(true);
    expect(policy.restricted("payments")).toBe(true);
    expect(policy.restricted("shop-b.orders")).toBe(true);
    expect(policy.restricted("shop-b.refunds")).toBe(false);
    expect(policy.restricted("internal.billing")).toBe(false);
    // No limited tokens: nothing is restricted.
    expect(destinationPolicy("admin", []).restricted("shop-a.orders")).toBe(false);
  });

  it("allow restricts nothing, refuse everything", () => {
    expect(destinationPolicy("allow", scopes).restricted("shop-a.orders")).toBe(false);
    expect(destinationPolicy("refuse", []).restricted("internal.billing")).toBe(true);
  });
});
