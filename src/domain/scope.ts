// Scopes: the topic patterns a caller (a bearer token) may act on, and the payment accounts whose
// orders it may watch.
import { z } from "zod";

/** `*` matches any run of topic characters; anything else matches itself. */
export const TopicPattern = z
  .string()
  .regex(/^[A-Za-z0-9_.:*-]{1,100}$/, "must be 1-100 characters of A-Z a-z 0-9 _ . : - and *");

/** The topics a caller may act on, as patterns; `undefined` means every topic. */
export type TopicScope = readonly string[] | undefined;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\-]/g, "\\$&");
}

export function scopeAllows(scope: TopicScope, topic: string): boolean {
  return scopeMatcher(scope)(topic);
}

/** The scope as one test, its patterns compiled once (for a scope asked about many times). */
export function scopeMatcher(scope: TopicScope): (topic: string) => boolean {
  if (scope === undefined) return () => true;
  const patterns = scope.map(
    (pattern) => new RegExp(`^${pattern.split("*").map(escapeRegExp).join(".*")}$`),
  );
  // delayq's own topics (__payments: every watch's poll job, whose record holds the watch's
  // spec) are no limited token's, whatever its patterns: `*` means every topic of the API's.
  return (topic) => !topic.startsWith("__") && patterns.some((pattern) => pattern.test(topic));
}

/**
 * The ranges of names a scope allows, when each of its patterns is a name or a prefix then one
 * `*` (`acme.orders`, `acme.*`, `*`): sorted, disjoint `[from, to)` pairs, every name within one
 * allowed. A page of topics read within them reads no name the scope hides, so where it ends
 * tells nothing of others' names. `undefined` for every topic, and for a scope with any other
 * pattern (`*.acme`, `a-*-b`), whose names no range holds.
 */
export function scopeRanges(scope: TopicScope): [string, string][] | undefined {
  if (scope === undefined) return undefined;
  const ranges: [string, string][] = [];
  for (const pattern of scope) {
    const star = pattern.indexOf("*");
    if (star >= 0 && star !== pattern.length - 1) return undefined;
    // Topic names are of A-Z a-z 0-9 _ . : -, all between "!" and DEL (0x7f): a name is the
    // only one in [name, name + "!"), and every name starting with a prefix is in [p, p + DEL).
    const prefix = pattern.slice(0, star < 0 ? undefined : star);
    ranges.push([prefix, star < 0 ? `${prefix}!` : `${prefix}\x7f`]);
  }
  // By start, and of two that start alike (`acme` and `acme*`) the wider first.
  const order = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  ranges.sort((a, b) => order(a[0], b[0]) || order(b[1], a[1]));
  const disjoint: [string, string][] = [];
  for (const range of ranges) {
    const previous = disjoint[disjoint.length - 1];
    // Prefix ranges are nested or apart: one starting within the previous ends within it too.
    if (previous && range[0] < previous[1]) continue;
    disjoint.push(range);
  }
  // delayq's own topics (`__…`) are outside every limited scope: cut out of the ranges.
  const [own, ownEnd] = ["__", "__\x7f"];
  return disjoint.flatMap(([from, to]): [string, string][] => {
    if (to <= own || from >= ownEnd) return [[from, to]];
    const pieces: [string, string][] = [];
    if (from < own) pieces.push([from, own]);
    if (to > ownEnd) pieces.push([ownEnd, to]);
    return pieces;
  });
}

/**
 * The scope as Lua patterns, one per line, for scripts that learn a job's topic only once they
 * have loaded it. "" means every topic.
 */
export function scopeToLua(scope: TopicScope): string {
  if (scope === undefined) return "";
  // Topic characters that are magic in Lua patterns: "." and "-".
  const lua = (pattern: string) =>
    `^${pattern
      .split("*")
      .map((part) => part.replace(/[.-]/g, "%$&"))
      .join(".*")}$`;
  // A scope with no patterns allows nothing: a pattern no topic matches.
  return scope.length === 0 ? "^$" : scope.map(lua).join("\n");
}

/**
 * A payment account a limited token may watch orders of: `provider/account`, either part `*` or
 * with `*` wildcards: `wechatpay/shop-a`, `alipay/shop-*`, or any provider's `shop-a` with `*` before
 * the slash. The slash tells it from a topic pattern, which cannot contain one.
 */
export const AccountPattern = z
  .string()
  .regex(
    /^(alipay|wechatpay|\*)\/[A-Za-z0-9_.*-]{1,64}$/,
    "must be provider/account: alipay, wechatpay or *, then / and an account name (* is a wildcard)",
  );

/**
 * The payment accounts a caller may watch orders of, as `provider/account` patterns; `undefined`
 * means every account (a token not limited to topics), `[]` none.
 */
export type AccountScope = readonly string[] | undefined;

/**
 * What a caller may act on: its topics, and the payment accounts whose orders it may watch.
 * `tokenId`: its token's id (http/auth.ts), which watches it starts are counted under.
 */
export type Access = { scope: TopicScope; accounts: AccountScope; tokenId?: string };

/** Whether `accounts` allows the orders of `provider`'s `account`. */
export function accountAllows(accounts: AccountScope, provider: string, account: string): boolean {
  return scopeMatcher(accounts)(`${provider}/${account}`);
}
