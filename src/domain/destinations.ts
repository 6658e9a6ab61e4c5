// Where push deliveries may go. A tenant's token (one limited to some topics) must not be able to
// point a push topic at the operator's own network: the cloud's metadata service, an admin panel
// on 10.0.0.5, Redis on 127.0.0.1. So deliveries of topics such a token can reach go to public
// addresses only, unless DQ_PRIVATE_PUSH says otherwise. Runtime-independent: the DNS side (a
// name that resolves to a private address) is src/dispatch/public-fetch.ts, on Node.
import { scopeMatcher, type TopicScope } from "./scope";

/**
 * DQ_PRIVATE_PUSH: which topics may push to private, loopback and link-local addresses.
 * `admin`: topics no topic-limited token can reach (the default); `allow`: all; `refuse`: none.
 */
export const PRIVATE_PUSH_SETTINGS = ["admin", "allow", "refuse"] as const;
export type PrivatePush = (typeof PRIVATE_PUSH_SETTINGS)[number];

/** Which topics deliver to public addresses only. */
export type DestinationPolicy = {
  setting: PrivatePush;
  /** Whether `topic`'s deliveries and failure notices must go to public addresses. */
  restricted(topic: string): boolean;
};

/** The policy for a setting and the scopes of the deployment's topic-limited tokens. */
export function destinationPolicy(
  setting: PrivatePush,
  limitedScopes: readonly TopicScope[],
): DestinationPolicy {
  // Asked for every delivery and notice: the tokens' patterns are compiled once.
  const reachable = limitedScopes.map(scopeMatcher);
  return {
    setting,
    restricted: (topic) =>
      setting === "refuse" || (setting === "admin" && reachable.some((allows) => allows(topic))),
  };
}

/** IPv4 ranges that are not the public internet (IANA's special-purpose registry), by kind. */
const IPV4_RANGES: readonly [base: string, bits: number, kind: string][] = [
  ["0.0.0.0", 8, "unspecified"],
  ["10.0.0.0", 8, "private"],
  ["100.64.0.0", 10, "shared (carrier-grade NAT)"],
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link-local (cloud metadata)"],
  ["172.16.0.0", 12, "private"],
  ["192.0.0.0", 24, "reserved"],
  ["192.0.2.0", 24, "documentation"],
  ["192.88.99.0", 24, "reserved (6to4 relay)"],
  ["192.168.0.0", 16, "private"],
  ["198.18.0.0", 15, "benchmarking"],
  ["198.51.100.0", 24, "documentation"],
  ["203.0.113.0", 24, "documentation"],
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved"],
];

function ipv4Number(text: string): number | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return undefined;
    value = value * 256 + Number(part);
  }
  return value;
}

function ipv4Kind(value: number): string | undefined {
  for (const [base, bits, kind] of IPV4_RANGES) {
    const size = 2 ** (32 - bits);
    const start = ipv4Number(base) as number;
    if (value >= start && value < start + size) return kind;
  }
  return undefined;
}

/** An IPv6 address as 8 groups of 16 bits (a dotted IPv4 tail allowed), or undefined. */
function ipv6Groups(text: string): number[] | undefined {
  let rest = text.split("%")[0] ?? ""; // a zone (fe80::1%eth0) names an interface
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(rest);
  if (dotted) {
    const v4 = ipv4Number(dotted[1] as string);
    if (v4 === undefined) return undefined;
    tail.push(Math.floor(v4 / 65536), v4 % 65536);
    rest = rest.slice(0, dotted.index); // "::ffff:" or "::" or "1:2:3:4:5:6:"
    if (rest.endsWith(":") && !rest.endsWith("::")) rest = rest.slice(0, -1);
  }
  const halves = rest.split("::");
  if (halves.length > 2) return undefined;
  const parse = (part: string) =>
    part === ""
      ? []
      : part.split(":").map((g) => (/^[0-9a-f]{1,4}$/i.test(g) ? parseInt(g, 16) : NaN));
  const head = parse(halves[0] as string);
  const back = halves.length === 2 ? parse(halves[1] as string) : [];
  const known = head.length + back.length + tail.length;
  if ([...head, ...back].some(Number.isNaN)) return undefined;
  if (halves.length === 1 && known !== 8) return undefined;
  if (halves.length === 2 && known > 7) return undefined;
  return [...head, ...new Array(8 - known).fill(0), ...back, ...tail];
}

function ipv6Kind(groups: number[]): string | undefined {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = groups;
  const embedded = () => ipv4Kind(g6 * 65536 + g7);
  const zeroTo = (n: number) => groups.slice(0, n).every((g) => g === 0);
  if (zeroTo(7) && g7 === 0) return "unspecified";
  if (zeroTo(7) && g7 === 1) return "loopback";
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d): the IPv4 address decides.
  if (zeroTo(5) && (g5 === 0xffff || g5 === 0)) return embedded();
  // NAT64 (64:ff9b::/96) reaches the IPv4 address it embeds; 64:ff9b:1::/48 is for local use.
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) {
    return embedded();
  }
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) return "private (local-use NAT64)";
  // 6to4 (2002::/16) reaches the IPv4 address in its next 32 bits.
  if (g0 === 0x2002) return ipv4Kind(g1 * 65536 + g2);
  if (g0 === 0x2001 && g1 === 0xdb8) return "documentation";
  if (g0 === 0x100 && g1 === 0 && g2 === 0 && g3 === 0) return "reserved (discard)";
  if ((g0 & 0xfe00) === 0xfc00) return "private (unique local)";
  if ((g0 & 0xffc0) === 0xfe80) return "link-local";
  if ((g0 & 0xffc0) === 0xfec0) return "private (site-local)";
  if ((g0 & 0xff00) === 0xff00) return "multicast";
  return undefined;
}

/**
 * What kind of non-public address `address` is (an IP address as text, IPv6 with or without
 * brackets), or undefined when it is public or not an IP address at all.
 */
export function nonPublicKind(address: string): string | undefined {
  const bare = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  const v4 = ipv4Number(bare);
  if (v4 !== undefined) return ipv4Kind(v4);
  if (!bare.includes(":")) return undefined;
  const groups = ipv6Groups(bare);
  return groups && ipv6Kind(groups);
}

/**
 * Why `url` is not a public destination as written (its host is a non-public IP address, or
 * localhost, which always names this machine), or undefined. Names that resolve to private
 * addresses are found when a delivery connects (on Node).
 */
export function nonPublicUrl(url: string): string | undefined {
  let host: string;
  try {
    // A trailing dot names the same host (localhost. is localhost).
    host = new URL(url).hostname.toLowerCase().replace(/\.$/, "");
  } catch {
    return undefined; // not a URL: the config's schema says so
  }
  if (host === "localhost" || host.endsWith(".localhost")) return `${host} is this machine`;
  const kind = nonPublicKind(host);
  return kind && `${host} is ${withArticle(kind)} address`;
}

/** "a loopback", "an unspecified": a kind of address with its article. */
export function withArticle(kind: string): string {
  return `${/^[aeiou]/.test(kind) ? "an" : "a"} ${kind}`;
}

/** What a refused destination's message adds: why, and what to do. */
export function restrictionNote(setting: PrivatePush): string {
  return setting === "refuse"
    ? "deliveries go to public addresses only (DQ_PRIVATE_PUSH=refuse). Use a public URL"
    : "this topic can be reached by a topic-limited token, so its deliveries go to public " +
        "addresses only (DQ_PRIVATE_PUSH=admin). Use a public URL, or a topic no limited token " +
        "reaches; an operator who trusts every token can set DQ_PRIVATE_PUSH=allow";
}
