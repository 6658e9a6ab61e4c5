// The auth fuzzer's inputs: tokens, the seeded dataset, near-miss tokens and request generators.
import fc from "fast-check";
import type { DelayQueue } from "../../../src/index";
import {
  isTopicName,
  toJsonText,
  validAddArb,
  validIdArb,
  validTopicArb,
  validTopicConfigArb,
  validTopicPatchArb,
  wellFormed,
  wire,
} from "./arbitraries";
import { csrfOf, type FuzzRequest, type SeedTools, sessionOf } from "./fuzz";

export const ADMIN = "admin-Tok3n-o9e4";
export const SHOP = "shop-a-Tok3n-i7k2";
export const TOKENS = [ADMIN, SHOP];
/** Every foreign job's body carries this; no response to the scoped token may contain it. */
export const MARKER = "MARKER-f0reign-7c1d";
/**
 * Push secrets of the seeded push topics, foreign and own: no answer to anyone contains one
 * (they are masked, "…" and the last 4, once set).
 */
export const PUSH_SECRETS = [
  "foreign-push-secret-Kq3w8Zr5",
  "foreign-push-secret-Lm2x7Yt4",
  "own-push-secret-Pv6n1Hs9Ja",
];
/** Pushed topics outside the scope; their configs (URL, headers, failureUrl) carry MARKER. */
export const FOREIGN_PUSH_TOPICS = ["shop-b.push", "shopa.push"];
export const OWN_PUSH_TOPIC = "shop-a.push";

/** Topics the scoped token may not touch, chosen to catch pattern bugs (regex and Lua). */
const FOREIGN_TOPICS = [
  "shop-b.orders",
  "payments",
  "shopa.orders", // Lua "shop-a" with "-" unescaped matches "shopa"
  "shoa.x", // ... and "shoa"
  "shop-aX", // "shop-a.*" with "." unescaped matches it
  "shop-a", // no dot: does not match "shop-a.*"
  "SHOP-A.orders", // case
  "xshop-a.y", // anchoring
  "shop-a-b.c",
];
export const OWN_TOPIC = "shop-a.orders";
export const matchesScope = (topic: string) => topic.startsWith("shop-a.");

export type Seeded = { receipts: Record<string, string> };
export const FOREIGN_IDS = [
  ...FOREIGN_TOPICS.flatMap((t) => [`${t}~d`, `${t}~r`, `${t}~x`]),
  ...FOREIGN_PUSH_TOPICS.map((t) => `${t}~d`),
];
export const OWN_IDS = ["own~d", "own~q", "own~r", "own~x", "own-push~d"];

export async function seed(queue: DelayQueue, tools: SeedTools): Promise<Seeded> {
  // A delivery counted for a foreign push topic: /metrics shows it to the admin only.
  tools.counters.inc("delayq_deliveries_total", { topic: "shop-b.push", outcome: "done" });
  const receipts: Record<string, string> = {};
  const fill = async (topic: string, prefix: string, body: (id: string) => unknown) => {
    await queue.add({ topic, id: `${prefix}~d`, delay: 3600, body: body(`${prefix}~d`) });
    await queue.add({ topic, id: `${prefix}~r`, body: body(`${prefix}~r`) });
    await queue.add({ topic, id: `${prefix}~x`, body: body(`${prefix}~x`) });
    for (const job of await queue.pop(topic, { count: 2 })) receipts[job.id] = String(job.receipt);
    await queue.bury(`${prefix}~x`, { receipt: receipts[`${prefix}~x`] });
  };
  for (const topic of FOREIGN_TOPICS) {
    await fill(topic, topic, (id) => ({ secret: `${MARKER} of ${id}` }));
  }
  await fill(OWN_TOPIC, "own", (id) => ({ mine: id }));
  await queue.add({ topic: OWN_TOPIC, id: "own~q", body: "ready" });
  const push = (topic: string, secret: string, tag: string) =>
    queue.configure(topic, {
      push: {
        url: `https://hooks.example/${tag}/hook`,
        secret,
        failureUrl: `https://hooks.example/${tag}/failed`,
        headers: { "X-Tag": tag },
      },
    });
  for (const [i, topic] of FOREIGN_PUSH_TOPICS.entries()) {
    await push(topic, PUSH_SECRETS[i] as string, MARKER);
    await queue.add({ topic, id: `${topic}~d`, delay: 3600, body: { secret: MARKER } });
  }
  await push(OWN_PUSH_TOPIC, PUSH_SECRETS[2] as string, "own");
  await queue.add({ topic: OWN_PUSH_TOPIC, id: "own-push~d", delay: 3600, body: { mine: 1 } });
  if (Object.keys(receipts).length !== 2 * (FOREIGN_TOPICS.length + 1)) {
    throw new Error("seed: pops did not reserve the jobs expected");
  }
  return { receipts };
}

// ---------------------------------------------------------------------------------------------
// Tokens

/** Characters that look like the tokens' own (Cyrillic, Greek, fullwidth, dashes, digits). */
const LOOKALIKES: Record<string, string[]> = {
  a: ["а", "ɑ", "ａ"],
  e: ["е", "ё", "ｅ"],
  o: ["о", "ο", "0", "ｏ"],
  i: ["і", "ı", "1", "l"],
  k: ["κ", "к"],
  n: ["п", "ո"],
  T: ["Т", "Τ"],
  "-": ["‐", "‑", "−", "–", "_"],
  "3": ["Ʒ", "з", "３"],
  "4": ["４", "Ꮞ"],
  "9": ["９", "g"],
  "7": ["７"],
  "2": ["２", "ᒿ"],
};
const WHITESPACE = [" ", "\t", "\u00a0", "\u200b", "\u3000", "\u2028", "\ufeff", "\u180e"];

function replaceAt(text: string, i: number, by: string) {
  return text.slice(0, i) + by + text.slice(i + 1);
}

/** Near misses of a real token. */
const nearMissArb = (token: string): fc.Arbitrary<string> =>
  fc.oneof(
    fc.integer({ min: 0, max: token.length - 1 }).map((n) => token.slice(0, n)),
    fc.integer({ min: 1, max: token.length - 1 }).map((n) => token.slice(n)),
    fc.string({ minLength: 1, maxLength: 4 }).map((s) => token + s),
    fc.string({ minLength: 1, maxLength: 4 }).map((s) => s + token),
    fc.nat().map((i) => {
      const at = i % token.length;
      const c = token[at] as string;
      const flipped = c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase();
      return replaceAt(token, at, flipped);
    }),
    fc.constantFrom(token.toUpperCase(), token.toLowerCase(), token + token, `${token}\u0000`),
    fc.constantFrom(`${token}:shop-a.*`, `${ADMIN},${SHOP}`, token.split("").reverse().join("")),
    fc.constantFrom(Buffer.from(token).toString("base64"), encodeURIComponent(`${token} `)),
    fc.constantFrom(token.normalize("NFKD"), token.replace(/[!-~]/g, fullwidth)),
    fc
      .tuple(fc.nat(), fc.constantFrom(...WHITESPACE))
      .map(
        ([i, w]) =>
          token.slice(0, 1 + (i % (token.length - 1))) +
          w +
          token.slice(1 + (i % (token.length - 1))),
      ),
    fc.tuple(fc.nat(), fc.nat()).map(([i, j]) => {
      const spots = [...token].flatMap((c, at) => (LOOKALIKES[c] ? [at] : []));
      const at = spots[i % spots.length] as number;
      const options = LOOKALIKES[token[at] as string] as string[];
      return replaceAt(token, at, options[j % options.length] as string);
    }),
    fc.nat().map((i) => replaceAt(token, i % token.length, "")),
    fc.nat().map((i) => {
      const at = i % (token.length - 1);
      return token.slice(0, at) + token[at + 1] + token[at] + token.slice(at + 2);
    }),
  );

function fullwidth(c: string): string {
  return String.fromCharCode(c.charCodeAt(0) + 0xfee0);
}

/** Bytes on the wire: UTF-8 (the usual), or latin1 when every character fits in a byte. */
const wireTokenArb = (candidate: fc.Arbitrary<string>) =>
  fc
    .tuple(candidate, fc.boolean())
    .map(([text, latin1]) =>
      latin1 && [...text].every((c) => c.charCodeAt(0) <= 0xff)
        ? text.replace(/[\0\r\n]/g, "")
        : wire(text),
    );

/** The real token, as far as the server can tell: trimmed of whitespace. */
const isRealToken = (token: string) => TOKENS.includes(token.replace(/^\s+|\s+$/g, ""));

/** An Authorization header that must be refused: a wrong token, or a right one sent wrong. */
export const badAuthArb: fc.Arbitrary<{ header?: string; token?: string }> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .tuple(
        fc.oneof(
          { weight: 1, arbitrary: fc.constant("Bearer ") },
          { weight: 1, arbitrary: fc.constantFrom("bearer ", "BEARER  ", "Bearer\t", "BeArEr ") },
        ),
        wireTokenArb(
          fc.oneof(
            { weight: 3, arbitrary: nearMissArb(ADMIN) },
            { weight: 2, arbitrary: nearMissArb(SHOP) },
            { weight: 1, arbitrary: fc.string({ maxLength: 64 }) },
            { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 64 }) },
          ),
        ).filter((token) => !isRealToken(token)),
      )
      .map(([scheme, token]) => ({ header: scheme + token, token })),
  },
  {
    // The real tokens under another scheme, or with something more in the header.
    weight: 2,
    arbitrary: fc
      .tuple(
        fc.constantFrom(...TOKENS),
        fc.constantFrom(
          (t: string) => `Basic ${t}`,
          (t: string) => `Token ${t}`,
          (t: string) => `Bearer:${t}`,
          (t: string) => `Bearer=${t}`,
          (t: string) => `Bearer${t}`,
          (t: string) => `Bearerr ${t}`,
          (t: string) => `Beare ${t}`,
          (t: string) => t,
          (t: string) => `Bearer Bearer ${t}`,
          (t: string) => `Bearer ${t} ${t}`,
          (t: string) => `Bearer ${t}, Bearer ${t}`,
          (t: string) => `Bearer wrong, Bearer ${t}`,
          (t: string) => `Bearer "${t}"`,
          (t: string) => `Bearer <${t}>`,
        ),
      )
      .map(([token, form]) => ({ header: form(token) })),
  },
  { weight: 1, arbitrary: fc.constantFrom({}, { header: "" }, { header: "Bearer" }) },
);

// ---------------------------------------------------------------------------------------------
// Requests: every /v1 route, with bodies that would change something if they were let through

export type RouteRequest = { method: string; path: string; body?: unknown };

const anyIdArb = fc.oneof(
  fc.constantFrom(...FOREIGN_IDS, ...OWN_IDS),
  validIdArb.map((id) => `new-${id}`),
);
const anyTopicArb = fc.oneof(
  fc.constantFrom(...FOREIGN_TOPICS, ...FOREIGN_PUSH_TOPICS, OWN_TOPIC, OWN_PUSH_TOPIC),
  validTopicArb,
);
const receiptFor = (id: string) => `@@RECEIPT:${id}@@`;

/** A request to every /v1 route (and unknown /v1 paths), valid as the admin would send it. */
export const v1RequestArb: fc.Arbitrary<RouteRequest> = fc.oneof(
  validAddArb(anyTopicArb, anyIdArb).map((body) => ({
    method: "POST",
    path: "/v1/jobs",
    body,
  })),
  fc
    .array(validAddArb(anyTopicArb, anyIdArb), { minLength: 1, maxLength: 3 })
    .map((jobs) => ({ method: "POST", path: "/v1/jobs/batch", body: { jobs } })),
  fc
    .tuple(fc.constantFrom("GET", "DELETE"), anyIdArb)
    .map(([method, id]) => ({ method, path: `/v1/jobs/${encodeURIComponent(id)}` })),
  fc.tuple(fc.constantFrom("finish", "touch", "release", "bury"), anyIdArb).map(([verb, id]) => ({
    method: "POST",
    path: `/v1/jobs/${encodeURIComponent(id)}/${verb}`,
    body: { receipt: receiptFor(id) },
  })),
  anyTopicArb.map((t) => ({ method: "POST", path: `/v1/topics/${t}/pop`, body: { count: 10 } })),
  anyTopicArb.map((t) => ({ method: "POST", path: `/v1/topics/${t}/kick`, body: {} })),
  anyTopicArb.map((t) => ({ method: "DELETE", path: `/v1/topics/${t}/dead?count=1000` })),
  fc.constant({ method: "GET", path: "/v1/topics" }),
  anyTopicArb.map((t) => ({ method: "GET", path: `/v1/topics/${t}` })),
  fc
    .tuple(anyTopicArb, validTopicConfigArb)
    .map(([t, body]) => ({ method: "PUT", path: `/v1/topics/${t}`, body })),
  fc
    .tuple(anyTopicArb, validTopicPatchArb)
    .map(([t, body]) => ({ method: "PATCH", path: `/v1/topics/${t}`, body })),
  fc.constant({ method: "GET", path: "/metrics" }),
  anyTopicArb.map((t) => ({ method: "GET", path: `/v1/topics/${t}/jobs?state=reserved` })),
  fc
    .tuple(fc.constantFrom("get", "delete", "finish", "bury", "touch", "release"), anyIdArb)
    .map(([command, id]) => ({
      method: "POST",
      path: "/v1/command",
      body: { command, id, receipt: receiptFor(id) },
    })),
  anyTopicArb.map((topic) => ({
    method: "POST",
    path: "/v1/command",
    body: [
      { command: "add", topic },
      { command: "pop", topic },
    ],
  })),
  fc
    .tuple(fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"), fc.webPath())
    .map(([method, p]) => ({ method, path: `/v1${p.startsWith("/") ? p : `/${p}`}`, body: {} })),
);

export function toRequest(route: RouteRequest, headers: Record<string, string>): FuzzRequest {
  const hasBody = route.body !== undefined && route.method !== "GET";
  return {
    method: route.method,
    path: route.path,
    headers,
    body: hasBody ? toJsonText(route.body) : undefined,
  };
}

// ---------------------------------------------------------------------------------------------
// Requests of the scoped token outside its scope, one generator per property

/** Valid topic names outside shop-a.*: random ones and near misses of the pattern. */
const foreignTopicArb = fc
  .oneof(
    validTopicArb,
    fc.constantFrom(...FOREIGN_TOPICS, ...FOREIGN_PUSH_TOPICS),
    fc.constantFrom("shop-a", "shop-a-", "shop-", "shopa.", "Shop-a.x", "shop-A.x", "shop-a_x"),
    fc.constantFrom("shop-a:x", "shop-a-.x", ".shop-a.x", "a.shop-a.x", "shop--a.x", "shop-a"),
    validTopicArb.map((s) => `shop-a${s}`),
    validTopicArb.map((s) => `shop-${s}`),
    validTopicArb.map((s) => `${s}shop-a.${s}`),
    validTopicArb.map((s) => `SHOP-A.${s}`),
  )
  .map((t) => t.slice(0, 100))
  .filter((t) => isTopicName(t) && !matchesScope(t));

/** A request naming a foreign topic: over HTTP, in a batch, or as a command. */
export const foreignTopicRequestArb = foreignTopicArb.chain((topic) =>
  fc.oneof(
    validAddArb(fc.constant(topic), validIdArb, "request-body").map((body) => ({
      kind: "http" as const,
      method: "POST",
      path: "/v1/jobs",
      body,
    })),
    fc
      .record(
        { count: fc.integer({ min: 1, max: 100 }), wait: fc.integer({ min: 0, max: 20 }) },
        { requiredKeys: [] },
      )
      .map((body) => ({
        kind: "http" as const,
        method: "POST",
        path: `/v1/topics/${topic}/pop`,
        body,
      })),
    fc
      .oneof(
        fc.constant({}),
        fc.record({ count: fc.integer({ min: 1, max: 1000 }) }),
        fc.record({ ids: fc.subarray(FOREIGN_IDS, { minLength: 1 }) }),
      )
      .map((body) => ({
        kind: "http" as const,
        method: "POST",
        path: `/v1/topics/${topic}/kick`,
        body,
      })),
    fc.integer({ min: 1, max: 1000 }).map((n) => ({
      kind: "http" as const,
      method: "DELETE",
      path: `/v1/topics/${topic}/dead?count=${n}`,
    })),
    fc.constant({ kind: "http" as const, method: "GET", path: `/v1/topics/${topic}` }),
    validTopicConfigArb.map((body) => ({
      kind: "http" as const,
      method: "PUT",
      path: `/v1/topics/${topic}`,
      body,
    })),
    validTopicPatchArb.map((body) => ({
      kind: "http" as const,
      method: "PATCH",
      path: `/v1/topics/${topic}`,
      body,
    })),
    fc.constantFrom("delayed", "ready", "reserved", "dead").map((state) => ({
      kind: "http" as const,
      method: "GET",
      path: `/v1/topics/${topic}/jobs?state=${state}`,
    })),
    validAddArb(fc.constant(topic), validIdArb, "request-body").map((job) => ({
      kind: "batch" as const,
      method: "POST",
      path: "/v1/jobs/batch",
      body: { jobs: [job] },
    })),
    validAddArb(fc.constant(topic), validIdArb, "request-body").map((job) => ({
      kind: "command" as const,
      method: "POST",
      path: "/v1/command",
      body: { command: "add", ...job },
    })),
    fc.integer({ min: 0, max: 20 }).map((wait) => ({
      kind: "command" as const,
      method: "POST",
      path: "/v1/command",
      body: { command: "pop", topic, wait },
    })),
  ),
);

const foreignIdArb = fc.constantFrom(...FOREIGN_IDS);
/** A receipt: the job's current one, another job's, or made up; or none. */
const receiptArb = (id: string) =>
  fc.option(
    fc.oneof(
      fc.constant(receiptFor(id)),
      fc.constantFrom(...OWN_IDS, ...FOREIGN_IDS).map(receiptFor),
      fc.string({ minLength: 1, maxLength: 100 }),
    ),
    { nil: undefined },
  );
const verbBody = (verb: string, id: string) =>
  fc
    .record({
      receipt: receiptArb(id),
      delay:
        verb === "release"
          ? fc.option(fc.integer({ min: 0, max: 3600 }), { nil: undefined })
          : fc.constant(undefined),
      empty: fc.boolean(),
    })
    .map(({ receipt, delay, empty }) => {
      if (empty) return undefined;
      const body: Record<string, unknown> = {};
      if (receipt !== undefined) body.receipt = receipt;
      if (delay !== undefined) body.delay = delay;
      return body;
    });
const commandArb = (id: string) =>
  fc
    .tuple(fc.constantFrom("get", "finish", "delete", "touch", "release", "bury"), receiptArb(id))
    .map(([command, receipt]) =>
      receipt === undefined ? { command, id } : { command, id, receipt },
    );

/** A request and what it must answer. */
export type Probe = RouteRequest & {
  expect: "403" | "404" | "envelopes" | "exists" | "kick0" | "listOwn" | "results404";
};
/** A request reaching a foreign job, by its id or from an own topic, and what it must answer. */
export const foreignIdProbeArb: fc.Arbitrary<Probe> = foreignIdArb.chain((id) => {
  const path = `/v1/jobs/${encodeURIComponent(id)}`;
  return fc.oneof(
    fc.constantFrom("GET", "DELETE").map((method): Probe => ({ method, path, expect: "404" })),
    fc
      .constantFrom("finish", "touch", "release", "bury")
      .chain((verb) =>
        verbBody(verb, id).map(
          (body): Probe => ({ method: "POST", path: `${path}/${verb}`, body, expect: "404" }),
        ),
      ),
    commandArb(id).map(
      (body): Probe => ({ method: "POST", path: "/v1/command", body, expect: "envelopes" }),
    ),
    // A batch finish of foreign jobs, with their receipts or others: each one job_not_found.
    fc
      .array(
        foreignIdArb.chain((other) =>
          receiptArb(other).map((receipt) =>
            receipt === undefined ? { id: other } : { id: other, receipt },
          ),
        ),
        { minLength: 0, maxLength: 4 },
      )
      .chain((others) =>
        receiptArb(id).map(
          (receipt): Probe => ({
            method: "POST",
            path: "/v1/jobs/finish",
            body: { jobs: [receipt === undefined ? { id } : { id, receipt }, ...others] },
            expect: "results404",
          }),
        ),
      ),
    fc
      .array(foreignIdArb.chain(commandArb), { minLength: 1, maxLength: 5 })
      .map((body): Probe => ({ method: "POST", path: "/v1/command", body, expect: "envelopes" })),
    // Other ways to reach a foreign job from an own topic: re-adding its id (with
    // replace), kicking it by id, listing the own topic.
    fc.record({ replace: fc.boolean(), body: fc.constant({ mine: "overwrite" }) }).map(
      (b): Probe => ({
        method: "POST",
        path: "/v1/jobs",
        body: { topic: OWN_TOPIC, id, ...b },
        expect: "exists",
      }),
    ),
    fc.boolean().map(
      (replace): Probe => ({
        method: "POST",
        path: "/v1/command",
        body: { command: "add", topic: OWN_TOPIC, id, replace },
        expect: "exists",
      }),
    ),
    fc.subarray(FOREIGN_IDS, { minLength: 1 }).map(
      (ids): Probe => ({
        method: "POST",
        path: `/v1/topics/${OWN_TOPIC}/kick`,
        body: { ids: [...ids, id] },
        expect: "kick0",
      }),
    ),
    fc.constantFrom("delayed", "ready", "reserved", "dead").map(
      (state): Probe => ({
        method: "GET",
        path: `/v1/topics/${OWN_TOPIC}/jobs?state=${state}&limit=1000`,
        expect: "listOwn",
      }),
    ),
    fc.constant<Probe>({ method: "GET", path: "/v1/topics?limit=100", expect: "listOwn" }),
  );
});

/** A topic inside the scope shop-a.*. */
export const ownTopicArb = fc
  .stringMatching(/^[A-Za-z0-9_.:-]{0,93}$/)
  .map((suffix) => `shop-a.${suffix}`);

// ---------------------------------------------------------------------------------------------
// The routes that do not take the bearer header: the dashboard (a cookie), ouqiang's API (the
// token in the path) and the QStash callback (a signature)

/** A token that is not ours, as text (a path segment or a cookie value carries it encoded). */
const notOursArb = fc
  .oneof(
    { weight: 3, arbitrary: nearMissArb(ADMIN) },
    { weight: 2, arbitrary: nearMissArb(SHOP) },
    { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 64 }) },
  )
  .map(wellFormed)
  .filter((token) => token !== "" && !TOKENS.includes(token) && token !== "." && token !== "..");

/** Requests a holder of `token` may send to ouqiang's API, on any topic or job. */
const compatRequestsOf = (token: string): fc.Arbitrary<RouteRequest> =>
  fc
    .oneof(
      validAddArb(anyTopicArb, anyIdArb).map((job) => ({
        endpoint: "push",
        body: { topic: job.topic, id: job.id ?? "x", delay: 60, body: "pushed" },
      })),
      fc
        .array(anyTopicArb, { minLength: 1, maxLength: 3 })
        .map((topics) => ({ endpoint: "pop", body: { topic: topics.join(","), wait: 0 } })),
      fc
        .tuple(fc.constantFrom("finish", "delete", "get"), anyIdArb)
        .map(([endpoint, id]) => ({ endpoint, body: { id, receipt: receiptFor(id) } })),
    )
    .map(({ endpoint, body }) => ({
      method: "POST",
      path: `/compat/ouqiang/${encodeURIComponent(token)}/${endpoint}`,
      body: endpoint === "finish" ? body : { ...body, receipt: undefined },
    }));

/**
 * Dashboard requests a session of `token` may send, on any topic or job: its session's (`signedIn`)
 * or, for a token that is not ours, the token itself as the cookie.
 */
const dashboardRequestsOf = (token: string, signedIn = false): fc.Arbitrary<FuzzRequest> => {
  const cookie = `delayq_dashboard=${signedIn ? sessionOf(token) : encodeURIComponent(token)}`;
  const page = (path: string): FuzzRequest => ({ method: "GET", path, headers: { cookie } });
  return fc.oneof(
    fc.constant(page("/dashboard")),
    fc.constant(page("/dashboard?limit=100")),
    anyTopicArb.chain((topic) =>
      fc
        .constantFrom("", "?state=dead", "?state=reserved", "?state=delayed")
        .map((q) => page(`/dashboard/topics/${encodeURIComponent(topic)}${q}`)),
    ),
    anyIdArb.map((id) => page(`/dashboard/jobs/${encodeURIComponent(id)}`)),
    fc
      .tuple(fc.constantFrom("topic", "job"), fc.oneof(anyTopicArb, anyIdArb))
      .map(([field, value]) => page(`/dashboard/find?${new URLSearchParams({ [field]: value })}`)),
    fc
      .record({
        action: fc.constantFrom("kick", "kick-dead", "delete", "delete-dead", "bury", "pause"),
        topic: anyTopicArb,
        id: anyIdArb,
      })
      .map((form) => ({
        method: "POST",
        path: "/dashboard/actions",
        headers: {
          cookie,
          "content-type": "application/x-www-form-urlencoded",
          "sec-fetch-site": "same-origin",
        },
        // The CSRF value of this very session, as a page of it would carry.
        body: new URLSearchParams({
          ...form,
          csrf: signedIn ? csrfOf(token) : "0".repeat(64),
          confirm: "yes",
        }).toString(),
      })),
  );
};

/** A request with a token that is not ours: a dashboard cookie, or an ouqiang path token. */
export const badPageRequestArb: fc.Arbitrary<FuzzRequest & { kind: "dashboard" | "compat" }> =
  notOursArb.chain((token) =>
    fc.oneof(
      dashboardRequestsOf(token).map((request) => ({ ...request, kind: "dashboard" as const })),
      compatRequestsOf(token).map((route) => ({
        ...toRequest(route, {}),
        kind: "compat" as const,
      })),
    ),
  );

/**
 * The scoped token's requests through the routes that are not /v1: its dashboard session, its
 * ouqiang path, /metrics. They name any topic and job, foreign ones included.
 */
export const scopedPageRequestArb: fc.Arbitrary<
  FuzzRequest & { kind: "dashboard" | "compat" | "metrics" }
> = fc.oneof(
  {
    weight: 4,
    arbitrary: dashboardRequestsOf(SHOP, true).map((r) => ({ ...r, kind: "dashboard" as const })),
  },
  {
    weight: 4,
    arbitrary: compatRequestsOf(SHOP).map((route) => ({
      ...toRequest(route, {}),
      kind: "compat" as const,
    })),
  },
  {
    weight: 1,
    arbitrary: fc.constant({
      method: "GET",
      path: "/metrics",
      headers: { authorization: `Bearer ${SHOP}` },
      kind: "metrics" as const,
    }),
  },
);

/**
 * A QStash callback for a seeded reservation, with a bearer token (ours, the scoped one's, or
 * not ours) but no valid signature: missing or spoiled.
 */
export const unsignedCallbackArb: fc.Arbitrary<FuzzRequest> = fc
  .record({
    id: fc.constantFrom(...FOREIGN_IDS.filter((id) => id.endsWith("~r")), ...OWN_IDS),
    bearer: fc.oneof(fc.constantFrom(...TOKENS), notOursArb.map(wire)),
    signature: fc.option(
      fc.constantFrom("wrong-key", "wrong-url", "wrong-body", "expired", "alg-none", "garbage"),
      { nil: undefined },
    ),
    status: fc.constantFrom(200, 500),
  })
  .map(({ id, bearer, signature, status }) => ({
    method: "POST",
    path: `/v1/qstash/callback?id=${encodeURIComponent(id)}&receipt=${receiptFor(id)}`,
    headers: {
      authorization: `Bearer ${bearer}`,
      ...(signature === undefined ? {} : { "upstash-signature": `@@SIGN:${signature}@@` }),
    },
    body: JSON.stringify({ status, body: "" }),
  }));
