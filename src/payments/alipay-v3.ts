// Alipay trade query and close on OpenAPI v3, RSA2-signed in the authorization header.

import type { AlipayAccount } from "./accounts";
import { closeError, describeError, mismatch, queryError, tradeAnswer } from "./alipay-answers";
import { answerCertificateProblem, v3CertificateAuth } from "./alipay-certificates";
import { loadKeys } from "./alipay-signing";
import { type CryptoKey, signRsaSha256, verifyRsaSha256 } from "./crypto";
import {
  type CloseAnswer,
  clip,
  fetchText,
  type ProviderAnswer,
  type ProviderOptions,
  parseJson,
  staleness,
  stringField,
} from "./provider";

export type V3Result =
  | { ok: true; status: number; body: Record<string, unknown> }
  | { ok: false; answer: { kind: "transient" | "config"; reason: string } };

/**
 * POSTs `biz` to `path` (`/v3/alipay/trade/query`, …), signed; the answer, verified (one not to
 * be trusted is transient, whatever its status), or why there is none.
 */
export async function v3Call(
  account: AlipayAccount,
  path: string,
  biz: Record<string, unknown>,
  options: ProviderOptions,
): Promise<V3Result> {
  const keys = await loadKeys(account);
  if ("reason" in keys) return { ok: false, answer: { kind: "config", reason: keys.reason } };
  const now = (options.clock ?? Date.now)();
  const body = JSON.stringify(biz);
  const url = new URL(`${account.baseUrl}${path}`);
  const { appCertSn, headers: certHeaders } = v3CertificateAuth(account.certificates);
  const authString = `app_id=${account.appId}${appCertSn},nonce=${crypto.randomUUID()},timestamp=${now}`;
  const content = `${authString}\nPOST\n${url.pathname}${url.search}\n${body}\n`;
  const sign = await signRsaSha256(keys.privateKey, content);
  const fetched = await fetchText(
    url.href,
    {
      method: "POST",
      headers: {
        authorization: `ALIPAY-SHA256withRSA ${authString},sign=${sign}`,
        "content-type": "application/json",
        accept: "application/json",
        "alipay-request-id": crypto.randomUUID().replaceAll("-", ""),
        ...certHeaders,
      },
      body,
    },
    options,
  );
  const transient = (reason: string): V3Result => ({
    ok: false,
    answer: { kind: "transient", reason },
  });
  if (!fetched.ok) return transient(fetched.reason);
  const { status, headers, text } = fetched;
  if (status >= 500 || status === 429) {
    const code = stringField(parseJson(text), "code");
    return transient(`HTTP ${status}${code ? ` ${code}` : ""}`);
  }
  // Only a verified answer decides anything, a 4xx too: Alipay may send its errors unsigned, and
  // an unsigned "invalid app id" could be anyone's; it is retried like a 5xx (DESIGN §4).
  // In certificate mode the answer must first name alipayCert (v3: the alipay-sn header).
  const problem =
    answerCertificateProblem(account.certificates, headers.get("alipay-sn"), now) ??
    (await unverified(keys.alipayPublicKey, headers, text, (options.clock ?? Date.now)()));
  if (problem) {
    const code = stringField(parseJson(text), "code");
    return transient(`${problem} (HTTP ${status}${code ? ` ${clip(code, 64)}` : ""})`);
  }
  const parsed = parseJson(text);
  if (status >= 200 && status < 300 && text === "") return { ok: true, status, body: {} };
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return transient(`HTTP ${status} answer is not a JSON object`);
  }
  return { ok: true, status, body: parsed as Record<string, unknown> };
}

/**
 * Why an answer is not to be trusted ("unverified: …", "stale: …"), or undefined: the signature
 * over `<alipay-timestamp>\n<alipay-nonce>\n<body>\n`, then the signed timestamp (unix ms) within
 * ANSWER_CLOCK_SKEW_MS of `now`.
 */
async function unverified(
  publicKey: CryptoKey,
  headers: Headers,
  text: string,
  now: number,
): Promise<string | undefined> {
  const signature = headers.get("alipay-signature");
  const timestamp = headers.get("alipay-timestamp");
  const nonce = headers.get("alipay-nonce");
  if (!signature) return "unverified: no alipay-signature";
  if (!timestamp || !nonce) return "unverified: no alipay-timestamp or alipay-nonce";
  if (!(await verifyRsaSha256(publicKey, `${timestamp}\n${nonce}\n${text}\n`, signature))) {
    return "unverified: alipay-signature does not verify";
  }
  if (!/^\d{1,15}$/.test(timestamp)) return "unverified: malformed alipay-timestamp";
  return staleness("alipay-timestamp", Number(timestamp), now);
}

export function v3Error(
  body: Record<string, unknown>,
  status: number,
): { code: string; reason: string; retryable: boolean } {
  const code = stringField(body, "code") ?? `HTTP ${status}`;
  return {
    code,
    reason: describeError(code, undefined, stringField(body, "message")),
    retryable: status === 408,
  };
}

export async function v3Query(
  account: AlipayAccount,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<ProviderAnswer> {
  const result = await v3Call(
    account,
    "/v3/alipay/trade/query",
    { out_trade_no: outTradeNo },
    options,
  );
  if (!result.ok) return result.answer;
  const { status, body } = result;
  if (status >= 200 && status < 300) {
    if (mismatch(body, outTradeNo))
      return { kind: "transient", reason: "answer names another order" };
    return tradeAnswer(body, "send_pay_date");
  }
  const { code, reason, retryable } = v3Error(body, status);
  return queryError(code, reason, retryable);
}

export async function v3Close(
  account: AlipayAccount,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<CloseAnswer> {
  const result = await v3Call(
    account,
    "/v3/alipay/trade/close",
    { out_trade_no: outTradeNo },
    options,
  );
  if (!result.ok) return result.answer;
  const { status, body } = result;
  if (status >= 200 && status < 300) return { kind: "closed" };
  const { code, reason, retryable } = v3Error(body, status);
  return closeError(code, reason, retryable);
}
