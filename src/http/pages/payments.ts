// The dashboard's payment-watches panel, and the hook (PaymentWatchSource) through which the
// payments room lists its watches. Until a source is wired in, the panel says there are none.
import { html } from "hono/html";
import type { AccountScope, TopicScope } from "../../domain/scope";
import { formatTime, type Html, relative } from "./layout";

/** A payment watch as the panel shows it (DESIGN §4's `Payment`; extra fields are ignored). */
export type PaymentWatchView = {
  provider: string;
  account: string;
  outTradeNo: string;
  state: string;
  polls: number;
  nextPollAt?: number;
  lastAnswer?: { tradeState: string; at: number };
  createdAt?: number;
  deadline?: number;
  notify?: readonly string[];
};

export type PaymentWatchPage = { watches: PaymentWatchView[]; cursor?: string };

/**
 * The hook for the payments room: list the watches a session may see, a page at a time (bounded
 * Redis cost per page), newest or by key as the source prefers. `scope` is the session token's
 * topics and `accounts` its payment accounts; a source should list only watches of an account
 * `accounts` allows whose notify topics `scope` allows. Pass it to createApp as `paymentWatches`.
 */
export type PaymentWatchSource = {
  list(options: {
    cursor?: string;
    /** Watches per page, 1–100. */
    limit: number;
    scope: TopicScope;
    accounts: AccountScope;
  }): Promise<PaymentWatchPage>;
};

export const WATCHES_PER_PAGE = 50;

/** The panel's body: the page of watches, or a sentence saying why there is none. */
export function watchesPanel(
  page: PaymentWatchPage | undefined,
  now: number,
  nextHref: string | undefined,
): Html {
  if (page === undefined) {
    return html`<p class="card muted" id="no-watches">No payment watches: this deployment does not
watch payments yet (no payment-watch source is configured).</p>`;
  }
  if (page.watches.length === 0) {
    return html`<p class="card muted" id="no-watches">No payment watches.</p>`;
  }
  return html`<table id="watches">
<thead><tr><th>Provider</th><th>Account</th><th>Order (outTradeNo)</th><th>State</th>
<th class="n">Polls</th><th>Next poll</th><th>Last answer</th><th>Deadline</th><th>Notify</th></tr></thead>
<tbody>${page.watches.map(
    (w) => html`<tr>
<td>${w.provider}</td><td>${w.account}</td><td class="mono">${w.outTradeNo}</td>
<td><span class="badge">${w.state}</span></td><td class="n">${w.polls}</td>
<td>${w.nextPollAt === undefined ? "" : html`${formatTime(w.nextPollAt)} <span class="muted small">(${relative(w.nextPollAt, now)})</span>`}</td>
<td>${w.lastAnswer ? html`<code>${w.lastAnswer.tradeState}</code> <span class="muted small">${formatTime(w.lastAnswer.at)}</span>` : html`<span class="muted">none yet</span>`}</td>
<td>${formatTime(w.deadline)}</td><td>${(w.notify ?? []).join(", ")}</td></tr>`,
  )}</tbody></table>
${nextHref ? html`<div class="pager"><a href="${nextHref}" id="next-page">Next page →</a></div>` : ""}`;
}

/** A refund watch as the panel shows it (DESIGN §4's `Refund`; extra fields are ignored). */
export type RefundWatchView = {
  provider: string;
  account: string;
  outRefundNo: string;
  outTradeNo?: string;
  state: string;
  polls: number;
  nextPollAt?: number;
  lastAnswer?: { status: string; at: number };
  deadline?: number;
  notify?: readonly string[];
};

export type RefundWatchPage = { refunds: RefundWatchView[]; cursor?: string };

/** The hook for refund watches, as PaymentWatchSource for payments (createApp's `refundWatches`). */
export type RefundWatchSource = {
  list(options: Parameters<PaymentWatchSource["list"]>[0]): Promise<RefundWatchPage>;
};

/** The refund watches' table under the payments', or nothing without a source or watches. */
export function refundsPanel(
  page: RefundWatchPage | undefined,
  now: number,
  nextHref: string | undefined,
): Html {
  if (page === undefined) return html``;
  if (page.refunds.length === 0) {
    return html`<h2>Refund watches</h2><p class="card muted" id="no-refunds">No refund watches.</p>`;
  }
  return html`<h2>Refund watches</h2>
<table id="refunds">
<thead><tr><th>Provider</th><th>Account</th><th>Refund (outRefundNo)</th><th>Order</th><th>State</th>
<th class="n">Polls</th><th>Next poll</th><th>Last answer</th><th>Deadline</th><th>Notify</th></tr></thead>
<tbody>${page.refunds.map(
    (r) => html`<tr>
<td>${r.provider}</td><td>${r.account}</td><td class="mono">${r.outRefundNo}</td><td class="mono">${r.outTradeNo ?? ""}</td>
<td><span class="badge">${r.state}</span></td><td class="n">${r.polls}</td>
<td>${r.nextPollAt === undefined ? "" : html`${formatTime(r.nextPollAt)} <span class="muted small">(${relative(r.nextPollAt, now)})</span>`}</td>
<td>${r.lastAnswer ? html`<code>${r.lastAnswer.status}</code> <span class="muted small">${formatTime(r.lastAnswer.at)}</span>` : html`<span class="muted">none yet</span>`}</td>
<td>${formatTime(r.deadline)}</td><td>${(r.notify ?? []).join(", ")}</td></tr>`,
  )}</tbody></table>
${nextHref ? html`<div class="pager"><a href="${nextHref}" id="next-refunds">Next page of refunds →</a></div>` : ""}`;
}
