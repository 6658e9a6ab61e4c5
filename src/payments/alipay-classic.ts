// Alipay trade query and close on the classic gateway (gateway.do), form-signed with RSA2.

import type { AlipayAccount } from "./accounts";
import { closeError, describeError, mismatch, queryError, tradeAnswer } from "./alipay-answers";
import { answerCertificateProblem, certificateParams } from "./alipay-certificates";
import { rawMembers } from "./alipay-raw-members";
import { alipaySignContent, beijingTimestamp, loadKeys } from "./alipay-signing";
import { type CryptoKey, signRsaSha256, verifyRsaSha256 } from "./crypto";
import {
  type CloseAnswer,
  type Fetched,
  fetchText,
  type ProviderAnswer,
  type ProviderOptions,
  parseJson,
  stringField,
} from "./provider";

type Method = "alipay.trade.query" | "alipay.trade.close" | "alipay.trade.fastpay.refund.query";

export type ClassicResult =
  | { ok: true; response: Record<string, unknown> }
  | { ok: false; answer: { kind: "transient" | "config"; reason: string } };

/**
 * Calls `method` with `biz` as its biz_content, signed; the response object, verified (one not
 * to be trusted is transient), or why there is none.
 */
export async function classicCall(
  account: AlipayAccount,
  method: Method,
  biz: Record<string, unknown>,
  options: ProviderOptions,
): Promise<ClassicResult> {
  const keys = await loadKeys(account);
  if ("reason" in keys) return { ok: false, answer: { kind: "config", reason: keys.reason } };
  const now = (options.clock ?? Date.now)();
  const bizContent = JSON.stringify(biz);
  const params: Record<string, string> = {
    app_id: account.appId,
    method,
    charset: "utf-8",
    sign_type: "RSA2",
    timestamp: beijingTimestamp(now),
    version: "1.0",
    biz_content: bizContent,
    ...certificateParams(account.certificates),
  };
  const sign = await signRsaSha256(keys.privateKey, alipaySignContent(params));
  const url = new URL(`${account.baseUrl}/gateway.do`);
  for (const [key, value] of Object.entries(params)) {
    if (key !== "biz_content") url.searchParams.set(key, value);
  }
  url.searchParams.set("sign", sign);
  const fetched = await fetchText(
    url.href,
    {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded;charset=utf-8",
        accept: "application/json",
      },
      body: new URLSearchParams({ biz_content: bizContent }).toString(),
    },
    options,
  );
  return readClassic(fetched, method, keys.alipayPublicKey, (sn) =>
    answerCertificateProblem(account.certificates, sn, now),
  );
}

async function readClassic(
  fetched: Fetched,
  method: Method,
  publicKey: CryptoKey,
  /** Certificate mode: why the answer's alipay_cert_sn rules it out. */
  certificateProblem: (sn: string | undefined) => string | undefined,
): Promise<ClassicResult> {
  const transient = (reason: string): ClassicResult => ({
    ok: false,
    answer: { kind: "transient", reason },
  });
  if (!fetched.ok) return transient(fetched.reason);
  if (fetched.status !== 200) return transient(`HTTP ${fetched.status}`);
  const body = parseJson(fetched.text);
  if (typeof body !== "object" || body === null) return transient("answer is not JSON");
  const responseKey = `${method.replaceAll(".", "_")}_response`;
  let raws = rawMembers(fetched.text, responseKey);
  if (raws.length === 0) raws = rawMembers(fetched.text, "error_response");
  const raw = raws[0];
  if (raw === undefined || raws.length > 1) return transient(`answer without one ${responseKey}`);
  const response = parseJson(raw);
  if (typeof response !== "object" || response === null)
    return transient("unreadable response object");
  const record = response as Record<string, unknown>;
  const code = String(record.code ?? "");
  const what = describeError(
    code,
    stringField(record, "sub_code"),
    stringField(record, "sub_msg") ?? stringField(record, "msg"),
  );
  const sign = stringField(body, "sign");
  // An answer we cannot verify says nothing about the trade, whatever its code: retry.
  if (!sign) return transient(`unverified: no sign (${what})`);
  const problem = certificateProblem(stringField(body, "alipay_cert_sn"));
  if (problem) return transient(`${problem} (${what})`);
  if (!(await verifyRsaSha256(publicKey, raw, sign))) {
    return transient(`unverified: sign does not verify (${what})`);
  }
  return { ok: true, response: record };
}

export function classicCode(record: Record<string, unknown>): {
  code: string;
  subCode: string;
  reason: string;
} {
  const code = String(record.code ?? "");
  const subCode = stringField(record, "sub_code") ?? "";
  const message = stringField(record, "sub_msg") ?? stringField(record, "msg");
  return { code, subCode, reason: describeError(code, subCode, message) };
}

export async function classicQuery(
  account: AlipayAccount,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<ProviderAnswer> {
  const result = await classicCall(
    account,
    "alipay.trade.query",
    { out_trade_no: outTradeNo },
    options,
  );
  if (!result.ok) return result.answer;
  const record = result.response;
  const { code, subCode, reason } = classicCode(record);
  if (code === "10000") {
    if (mismatch(record, outTradeNo))
      return { kind: "transient", reason: "answer names another order" };
    return tradeAnswer(record, "send_pay_date");
  }
  if (code === "40004") return queryError(subCode, reason, false);
  // 20000 is Alipay's "service unavailable" (isp.unknow-error, aop.unknow-error); 4000x are ours.
  return queryError(subCode, reason, !code.startsWith("4") && code !== "20001");
}

export async function classicClose(
  account: AlipayAccount,
  outTradeNo: string,
  options: ProviderOptions,
): Promise<CloseAnswer> {
  const result = await classicCall(
    account,
    "alipay.trade.close",
    { out_trade_no: outTradeNo },
    options,
  );
  if (!result.ok) return result.answer;
  const { code, subCode, reason } = classicCode(result.response);
  if (code === "10000") return { kind: "closed" };
  if (code === "40004") return closeError(subCode, reason, false);
  return closeError(subCode, reason, !code.startsWith("4") && code !== "20001");
}
