// The Alipay provider (classic gateway or OpenAPI v3, per account) and Alipay's public names.

import type { AlipayAccount } from "./accounts";
import { classicClose, classicQuery } from "./alipay-classic";
import { v3Close, v3Query } from "./alipay-v3";
import type { Provider, ProviderOptions } from "./provider";

export { ALIPAY_TRADE_STATES } from "./alipay-answers";
export { verifyAlipayNotification } from "./alipay-notification";
export { rawMembers } from "./alipay-raw-members";
export { alipaySignContent, beijingTimestamp, parseBeijingTime } from "./alipay-signing";

/** Queries and closes trades of one Alipay account, on the classic gateway or v3 per `account.api`. */
export function alipayProvider(account: AlipayAccount, options: ProviderOptions = {}): Provider {
  if (account.api === "v3") {
    return {
      query: (outTradeNo) => v3Query(account, outTradeNo, options),
      close: (outTradeNo) => v3Close(account, outTradeNo, options),
    };
  }
  return {
    query: (outTradeNo) => classicQuery(account, outTradeNo, options),
    close: (outTradeNo) => classicClose(account, outTradeNo, options),
  };
}
