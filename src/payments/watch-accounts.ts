// The provider behind a watch's account, and what a caller may know of accounts it may not use.
import { DelayqError } from "../domain/errors";
import type { ProviderName } from "../domain/payments";
import { type AccountScope, accountAllows } from "../domain/scope";
import type { AlipayAccount, WechatPayAccount } from "./accounts";
import { alipayProvider } from "./alipay";
import { alipayRefunds } from "./alipay-refunds";
import type { Provider, ProviderOptions } from "./provider";
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
  return clientOf(options, name, account, accounts, {
    alipay: alipayProvider,
    wechatpay: wechatPayProvider,
  });
}

/** The refund queries of `account`, or unknown_account (as providerOf). */
export function refundProviderOf(
  options: Accounts,
  name: ProviderName,
  account: string,
  accounts?: AccountScope,
): RefundProvider {
  return clientOf(options, name, account, accounts, {
    alipay: alipayRefunds,
    wechatpay: wechatPayRefunds,
  });
}

/** Throws unknown_account unless `account` is one of provider `name`'s (as providerOf). */
export function checkAccount(
  options: Accounts,
  name: ProviderName,
  account: string,
  accounts?: AccountScope,
): void {
  const known = name === "alipay" ? options.alipay.has(account) : options.wechatpay.has(account);
  if (!known) throw unknownAccount(options, name, account, accounts);
}

/** A client of `account` made by its provider's maker, or unknown_account. */
function clientOf<C>(
  options: Accounts,
  name: ProviderName,
  account: string,
  accounts: AccountScope,
  make: {
    alipay: (account: AlipayAccount, options?: ProviderOptions) => C;
    wechatpay: (account: WechatPayAccount, options?: ProviderOptions) => C;
  },
): C {
  if (name === "alipay") {
    const found = options.alipay.get(account);
    if (found) return make.alipay(found, options.providerOptions);
  } else {
    const found = options.wechatpay.get(account);
    if (found) return make.wechatpay(found, options.providerOptions);
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
