// The provider behind a watch's account, and what a caller may know of accounts it may not use.
import { DelayqError } from "../domain/errors";
import type { ProviderName } from "../domain/payments";
import { type AccountScope, accountAllows } from "../domain/scope";
import { alipayProvider } from "./alipay";
import { alipayRefunds } from "./alipay-refunds";
import type { Provider } from "./provider";
import type { RefundProvider } from "./refund-provider";
import type { PaymentsOptions } from "./watch-types";
import { wechatPayProvider } from "./wechatpay";
import { wechatPayRefunds } from "./wechatpay-refunds";

type Accounts = Pick<PaymentsOptions, "alipay" | "wechatpay" | "providerOptions">;

/**
 * The provider client of `account`, or unknown_account. `accounts`: whose names the error may
 * list (a limited caller's own); undefined lists them all.
 */
export function providerOf(
  options: Accounts,
  name: ProviderName,
  account: string,
  accounts?: AccountScope,
): Provider {
  if (name === "alipay") {
    const found = options.alipay.get(account);
    if (found) return alipayProvider(found, options.providerOptions);
  } else {
    const found = options.wechatpay.get(account);
    if (found) return wechatPayProvider(found, options.providerOptions);
  }
  throw unknownAccount(options, name, account, accounts);
}

/** The refund queries of `account`, or unknown_account (as providerOf). */
export function refundProviderOf(
  options: Accounts,
  name: ProviderName,
  account: string,
  accounts?: AccountScope,
): RefundProvider {
  if (name === "alipay") {
    const found = options.alipay.get(account);
    if (found) return alipayRefunds(found, options.providerOptions);
  } else {
    const found = options.wechatpay.get(account);
    if (found) return wechatPayRefunds(found, options.providerOptions);
  }
  throw unknownAccount(options, name, account, accounts);
}

function unknownAccount(
  options: Accounts,
  name: ProviderName,
  account: string,
  accounts: AccountScope,
): DelayqError {
  const variable = name === "alipay" ? "DQ_ALIPAY_ACCOUNTS" : "DQ_WECHATPAY_ACCOUNTS";
  // Others' account names are not a limited caller's business: it is told of its own only.
  const known = [...(name === "alipay" ? options.alipay : options.wechatpay).keys()].filter(
    (known) => accountAllows(accounts, name, known),
  );
  const listed =
    known.length > 0
      ? known.map((k) => `"${k}"`).join(", ")
      : accounts === undefined
        ? "none is set"
        : "none this token may watch";
  return new DelayqError(
    "unknown_account",
    `No ${name} account "${account}": the accounts are the keys of ${variable} (${listed})`,
  );
}
