// Checks of the two ways to name a Redis (Upstash's REST URL, a TCP URL), with messages that say
// what to set instead; shared by the service's config and the TCP driver, never quoting a value
// (a URL may carry the password).

/**
 * Why a value is not an Upstash REST URL, or undefined when it is one. Upstash's console shows
 * the database's TCP URL (rediss://) next to the REST URL, and the first is easy to paste here.
 * The value itself is never quoted: a TCP URL carries the password. On Node (`onNode`), where
 * REDIS_URL takes a TCP URL, the message says so.
 */
export function restUrlProblem(value: string, onNode = false): string | undefined {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value.trim())?.[1]?.toLowerCase();
  if (scheme === "redis" || scheme === "rediss") {
    return (
      `UPSTASH_REDIS_REST_URL is a Redis TCP URL (${scheme}://...), but delayq talks to Upstash ` +
      "over REST: give the database's REST URL, https://<name>.upstash.io (the console's REST " +
      "API section, next to UPSTASH_REDIS_REST_TOKEN)" +
      (onNode ? "; on Node, a TCP URL goes in REDIS_URL instead" : "")
    );
  }
  if (value !== value.trim()) {
    return "UPSTASH_REDIS_REST_URL has spaces or a line break around it: remove them";
  }
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  // The same shape @upstash/redis insists on, so that its constructor never throws at start.
  if (!url || !/^https?:$/.test(url.protocol) || !/^https?:\/\/[^\s#$./?].\S*$/.test(value)) {
    return "UPSTASH_REDIS_REST_URL must be a URL such as https://<name>.upstash.io (the database's REST URL)";
  }
  return undefined;
}

/**
 * Why a value is not a Redis TCP URL for REDIS_URL, or undefined when it is one:
 * `redis://[[user]:password@]host[:port][/db]`, or `rediss://` for TLS. The value is never quoted
 * (it carries the password).
 */
export function redisUrlProblem(value: string): string | undefined {
  const shape = "redis://[[user]:password@]host[:port][/db], or rediss://... for TLS";
  if (value !== value.trim()) return "REDIS_URL has spaces or a line break around it: remove them";
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(value)?.[1]?.toLowerCase();
  if (scheme === "http" || scheme === "https") {
    return (
      `REDIS_URL is an HTTP URL, but it is for Redis over TCP (${shape}); an Upstash REST URL ` +
      "goes in UPSTASH_REDIS_REST_URL, with UPSTASH_REDIS_REST_TOKEN"
    );
  }
  if (scheme !== "redis" && scheme !== "rediss") return `REDIS_URL must look like ${shape}`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `REDIS_URL is not a valid URL: it must look like ${shape} (percent-encode a password's special characters)`;
  }
  if (!url.hostname) return `REDIS_URL has no host: it must look like ${shape}`;
  if (!/^(\/(\d{1,5})?)?$/.test(url.pathname)) {
    return "REDIS_URL's path must be a database number such as /0, or nothing";
  }
  return undefined;
}

/** A seed node of REDIS_CLUSTER_NODES. */
export type ClusterNode = { host: string; port: number };

/**
 * The seed nodes of REDIS_CLUSTER_NODES (`host:port,host:port,...`, an IPv6 host in brackets:
 * `[::1]:7000`), or why the value is not such a list: the message names the entry by its place
 * and never quotes it.
 */
export function parseClusterNodes(value: string): ClusterNode[] | string {
  const shape = "host:port,host:port,... (e.g. redis-1:6379,redis-2:6379)";
  const entries = value.split(",").map((entry) => entry.trim());
  if (entries.every((entry) => entry === "")) {
    return `REDIS_CLUSTER_NODES is empty: give the cluster's seed nodes as ${shape}`;
  }
  const nodes: ClusterNode[] = [];
  for (const [i, entry] of entries.entries()) {
    const place = `REDIS_CLUSTER_NODES: entry ${i + 1}`;
    if (entry === "") return `${place} is empty: give the seed nodes as ${shape}`;
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(entry)) {
      return `${place} is a URL: give host:port alone (a password goes in REDIS_PASSWORD)`;
    }
    const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:@/[\]]+)):(\d{1,5})$/.exec(entry);
    if (!match) return `${place} is not host:port: give the seed nodes as ${shape}`;
    const port = Number(match[3]);
    if (port < 1 || port > 65_535) return `${place} has a port out of range (1-65535)`;
    nodes.push({ host: (match[1] ?? match[2]) as string, port });
  }
  return nodes;
}
