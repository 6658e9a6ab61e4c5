// The merchant accounts from DQ_ALIPAY_ACCOUNTS / DQ_WECHATPAY_ACCOUNTS (DESIGN §4), checked once.
// Keys are parsed structurally here, so a bad key fails at start-up, not at the first poll; errors
// name the variable, the account and the field, and never echo a value.

import { z } from "zod";
import { resolveReferences } from "./account-references";
import {
  ALIPAY_CERTIFICATE_FIELDS,
  type AlipayCertificates,
  alipayCertPublicKey,
  alipayRootBundle,
  chainProblem,
  readAlipayCertificates,
} from "./alipay-certificates";
import { certificates, privateKeyToPkcs8, publicKeyToSpki } from "./keys";
import { PAYMENTS_ERROR_CODE, PaymentsError } from "./provider";

export const ALIPAY_ACCOUNTS_VARIABLE = "DQ_ALIPAY_ACCOUNTS";
export const WECHATPAY_ACCOUNTS_VARIABLE = "DQ_WECHATPAY_ACCOUNTS";

/** Account names appear in URLs (/v1/payments/{provider}/{account}/…), so they stay path-safe. */
const ACCOUNT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** A key check as a zod refinement; the key module's messages never quote the key. */
function keyText(parse: (text: string) => unknown) {
  return z
    .string()
    .min(1)
    .superRefine((value, ctx) => {
      try {
        parse(value);
      } catch (error) {
        ctx.addIssue({
          code: "custom",
          message: error instanceof PaymentsError ? error.message : "unreadable key",
        });
      }
    });
}

const baseUrl = (fallback: string) =>
  z
    .string()
    .superRefine((value, ctx) => {
      let url: URL | undefined;
      try {
        url = new URL(value);
      } catch {
        // reported below
      }
      if (!url || (url.protocol !== "https:" && url.protocol !== "http:")) {
        ctx.addIssue({ code: "custom", message: "must be an http(s) URL" });
      } else if (url.search || url.hash) {
        ctx.addIssue({ code: "custom", message: "must not carry a query or fragment" });
      }
    })
    .default(fallback)
    .transform((value) => value.replace(/\/+$/, ""));

export const AlipayAccountSchema = z
  .strictObject({
    appId: z.string().min(1),
    privateKey: keyText(privateKeyToPkcs8),
    /** Public-key mode. */
    alipayPublicKey: keyText(publicKeyToSpki).optional(),
    /** Certificate mode: the app's certificate, Alipay's (and its intermediates), the roots. */
    appCert: keyText(certificates).optional(),
    alipayCert: keyText(certificates).optional(),
    alipayRootCert: keyText(alipayRootBundle).optional(),
    api: z.enum(["classic", "v3"]).default("classic"),
    baseUrl: baseUrl("https://openapi.alipay.com"),
  })
  .superRefine((account, ctx) => {
    const given = ALIPAY_CERTIFICATE_FIELDS.filter((field) => account[field] !== undefined);
    if (account.alipayPublicKey !== undefined && given.length > 0) {
      ctx.addIssue({
        code: "custom",
        message: `mixes the two modes: give "alipayPublicKey" (public-key mode) or "appCert", "alipayCert" and "alipayRootCert" (certificate mode), not both`,
      });
    } else if (given.length > 0 && given.length < ALIPAY_CERTIFICATE_FIELDS.length) {
      const missing = ALIPAY_CERTIFICATE_FIELDS.filter((field) => !given.includes(field));
      ctx.addIssue({
        code: "custom",
        message: `is in certificate mode and also needs ${missing.map((f) => `"${f}"`).join(" and ")}`,
      });
    } else if (account.alipayPublicKey === undefined && given.length === 0) {
      ctx.addIssue({
        code: "custom",
        message: `needs Alipay's key: "alipayPublicKey" (public-key mode) or "appCert", "alipayCert" and "alipayRootCert" (certificate mode)`,
      });
    }
  });

type AlipayAccountFields = z.output<typeof AlipayAccountSchema>;

export const WechatPayAccountSchema = z
  .strictObject({
    mchid: z.union([z.string().regex(/^\d+$/, "must be digits"), z.number().int().positive()]),
    serialNo: z.string().regex(/^[0-9A-Fa-f]+$/, "must be the merchant certificate's hex serial"),
    privateKey: keyText(privateKeyToPkcs8),
    apiV3Key: z.string().refine((value) => new TextEncoder().encode(value).length === 32, {
      message: "must be the 32-character APIv3 key",
    }),
    platformPublicKey: keyText(publicKeyToSpki).optional(),
    platformPublicKeyId: z.string().min(1).optional(),
    platformCertificates: z
      .array(keyText(certificates))
      .min(1, "must hold at least one certificate")
      .optional(),
    baseUrl: baseUrl("https://api.mch.weixin.qq.com"),
  })
  .superRefine((account, ctx) => {
    const hasKey = account.platformPublicKey !== undefined;
    const hasKeyId = account.platformPublicKeyId !== undefined;
    if (hasKey !== hasKeyId) {
      ctx.addIssue({
        code: "custom",
        path: [hasKey ? "platformPublicKeyId" : "platformPublicKey"],
        message: "platformPublicKey and platformPublicKeyId go together",
      });
    }
    if (!hasKey && !hasKeyId && account.platformCertificates === undefined) {
      ctx.addIssue({
        code: "custom",
        message:
          "needs the WeChat Pay public key (platformPublicKey + platformPublicKeyId) or platformCertificates",
      });
    }
  });

export type AlipayAccount = Omit<
  AlipayAccountFields,
  "alipayPublicKey" | (typeof ALIPAY_CERTIFICATE_FIELDS)[number]
> & {
  name: string;
  /** Alipay's key: given (public-key mode), or alipayCert's (certificate mode). */
  alipayPublicKey: string;
  /** Certificate mode: the SNs requests carry and answers must name, and the chain. */
  certificates?: AlipayCertificates;
};

export type WechatPayAccount = Omit<z.output<typeof WechatPayAccountSchema>, "mchid"> & {
  name: string;
  mchid: string;
};

/** The accounts variable's value: JSON text (a secret) or an object (a wrangler var table). */
function readVariable(variable: string, value: unknown): Record<string, unknown> {
  let parsed: unknown = value;
  if (typeof value === "string") {
    if (value.trim() === "") return {};
    try {
      parsed = JSON.parse(value);
    } catch {
      // JSON.parse's own message quotes the text, which holds keys: say only where to look.
      throw new PaymentsError(
        PAYMENTS_ERROR_CODE.invalidAccounts,
        `${variable} is not valid JSON: give an object keyed by account name`,
      );
    }
  } else if (value === undefined || value === null) {
    return {};
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new PaymentsError(
      PAYMENTS_ERROR_CODE.invalidAccounts,
      `${variable} must be a JSON object keyed by account name, e.g. {"shop": {...}}`,
    );
  }
  return parsed as Record<string, unknown>;
}

/** One issue as a sentence that names the field and never the value. */
function describe(issue: z.core.$ZodIssue): string {
  const field = issue.path.map(String).join(".");
  const subject = field ? `"${field}"` : "the account";
  switch (issue.code) {
    case "invalid_type":
      return issue.input === undefined
        ? `${subject} is missing`
        : `${subject} must be ${/^[aeiou]/.test(issue.expected) ? "an" : "a"} ${issue.expected}`;
    case "too_small":
      return `${subject} must not be empty`;
    case "invalid_value":
      return `${subject} must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "invalid_format":
      return `${subject} ${issue.format === "regex" ? issue.message : "is malformed"}`;
    case "unrecognized_keys":
      return `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")}`;
    case "invalid_union":
      return `${subject} must be a string of digits`;
    case "custom":
      return `${subject} ${issue.message}`;
    default:
      return `${subject} is invalid`;
  }
}

function parseAccounts<S extends z.ZodType>(
  variable: string,
  value: unknown,
  schema: S,
  env: Readonly<Record<string, unknown>>,
): Map<string, z.output<S>> {
  const out = new Map<string, z.output<S>>();
  for (const [name, raw] of Object.entries(readVariable(variable, value))) {
    if (!ACCOUNT_NAME.test(name)) {
      throw new PaymentsError(
        PAYMENTS_ERROR_CODE.invalidAccounts,
        `${variable}: account names must be 1-64 characters of A-Z a-z 0-9 _ . - (starting with a letter or digit)`,
      );
    }
    const { account, problems: unresolved } = resolveReferences(raw, env);
    if (unresolved.length > 0) {
      throw new PaymentsError(
        PAYMENTS_ERROR_CODE.invalidAccounts,
        `${variable}: account "${name}": ${unresolved.join("; ")}`,
      );
    }
    // Inputs are reported only to tell a missing field from a wrong one; they are never printed.
    const result = schema.safeParse(account, { reportInput: true });
    if (!result.success) {
      const problems = result.error.issues.map(describe).join("; ");
      throw new PaymentsError(
        PAYMENTS_ERROR_CODE.invalidAccounts,
        `${variable}: account "${name}": ${problems}`,
      );
    }
    out.set(name, result.data);
  }
  return out;
}

/** One checked account's fields → the account: certificate mode read into SNs and a key. */
function alipayAccount(name: string, fields: AlipayAccountFields): AlipayAccount {
  const { alipayPublicKey, appCert, alipayCert, alipayRootCert, ...rest } = fields;
  if (appCert !== undefined && alipayCert !== undefined && alipayRootCert !== undefined) {
    const certs = readAlipayCertificates({ appCert, alipayCert, alipayRootCert });
    return { ...rest, name, alipayPublicKey: alipayCertPublicKey(certs), certificates: certs };
  }
  return { ...rest, name, alipayPublicKey: alipayPublicKey ?? "" };
}

/**
 * DQ_ALIPAY_ACCOUNTS → accounts by name. Unset or empty → none. Throws invalidAccounts. What
 * takes WebCrypto (a certificate's chain) is checked apart, by checkAccounts. `env`: the
 * variables a key or certificate field may name ({"env": "NAME"}).
 */
export function parseAlipayAccounts(
  value: unknown,
  env: Readonly<Record<string, unknown>> = {},
): Map<string, AlipayAccount> {
  const parsed = parseAccounts(ALIPAY_ACCOUNTS_VARIABLE, value, AlipayAccountSchema, env);
  return new Map([...parsed].map(([name, fields]) => [name, alipayAccount(name, fields)]));
}

/**
 * The checks of the accounts that take WebCrypto, which is asynchronous: that each
 * certificate-mode Alipay account's alipayCert chains to its alipayRootCert. Rejects with
 * invalidAccounts naming the variable, the account and the reason, never a certificate.
 */
export async function checkAccounts(accounts: {
  alipay: ReadonlyMap<string, AlipayAccount>;
}): Promise<void> {
  for (const [name, account] of accounts.alipay) {
    if (!account.certificates) continue;
    const problem = await chainProblem(account.certificates);
    if (problem) {
      throw new PaymentsError(
        PAYMENTS_ERROR_CODE.invalidAccounts,
        `${ALIPAY_ACCOUNTS_VARIABLE}: account "${name}": ${problem}`,
      );
    }
  }
}

/**
 * DQ_WECHATPAY_ACCOUNTS → accounts by name. Unset or empty → none. Throws invalidAccounts. `env`:
 * the variables a key or certificate field may name ({"env": "NAME"}).
 */
export function parseWechatPayAccounts(
  value: unknown,
  env: Readonly<Record<string, unknown>> = {},
): Map<string, WechatPayAccount> {
  const parsed = parseAccounts(WECHATPAY_ACCOUNTS_VARIABLE, value, WechatPayAccountSchema, env);
  return new Map(
    [...parsed].map(([name, account]) => [
      name,
      {
        ...account,
        name,
        mchid: String(account.mchid),
        serialNo: account.serialNo.toUpperCase(),
      },
    ]),
  );
}
