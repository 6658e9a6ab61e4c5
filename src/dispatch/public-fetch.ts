// Node only (functions/node.ts): the fetch for deliveries that must reach public addresses only.
// A URL's host is checked as written before anything is sent (src/domain/destinations.ts); this
// checks what a name resolves to, at the moment the connection is made, so a name that resolves
// to 10.0.0.5 (or is made to, between a check and the connect) is refused, never connected to.
// The error names the kind of address, not the address: a tenant reads it in lastDelivery.
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import { Agent, fetch as undiciFetch } from "undici";
import { nonPublicKind, withArticle } from "../domain/destinations";
import type { Post } from "./delivery";

/** dns.lookup's shape with `all: true`, the one this module calls. */
export type Resolve = (
  hostname: string,
  options: LookupOptions & { all: true },
  callback: (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

/** Why a connection is refused: the name, and the kind of non-public address it resolved to. */
export class NonPublicAddressError extends Error {
  readonly code = "ENONPUBLIC";
}

/**
 * A fetch that connects only to public addresses: every address a name resolves to must be
 * public, or the request fails before any connection is made (a failed delivery, status 0, its
 * error naming the kind of address). `resolve` is dns.lookup unless given (tests name their own
 * hosts).
 */
export function publicFetch(options: { resolve?: Resolve } = {}): Post {
  const dispatcher = new Agent({ connect: { lookup: publicLookup(options.resolve) } });
  return (url, init) =>
    undiciFetch(url, { ...(init as object), dispatcher }) as unknown as Promise<Response>;
}

/**
 * A `lookup` for net.connect that fails on a non-public address: every address `resolve`
 * answers is checked, then handed over as the connection asked (all of them, or the first).
 */
export function publicLookup(resolve: Resolve = dnsLookup as Resolve) {
  return (
    hostname: string,
    lookupOptions: LookupOptions,
    callback: (
      error: NodeJS.ErrnoException | null,
      address: string | LookupAddress[],
      family?: number,
    ) => void,
  ) =>
    resolve(hostname, { ...lookupOptions, all: true }, (error, addresses) => {
      if (error) return callback(error, "");
      for (const { address } of addresses) {
        const kind = nonPublicKind(address);
        if (kind) {
          return callback(
            new NonPublicAddressError(
              `${hostname} resolves to ${withArticle(kind)} address, and this topic pushes to public addresses only (DQ_PRIVATE_PUSH)`,
            ),
            "",
          );
        }
      }
      if (lookupOptions.all) return callback(null, addresses);
      const [first] = addresses;
      if (!first)
        return callback(
          Object.assign(new Error(`${hostname}: no address`), { code: "ENOTFOUND" }),
          "",
        );
      callback(null, first.address, first.family);
    });
}
