// The HTML shell of the ops pages and the small formatters they share. Every value goes through
// hono/html's `html` template, which escapes what it interpolates: job bodies are user data.
import type { Context } from "hono";
import { html } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";
import { RawJson } from "../../domain/raw-json";

export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

/** Where the stylesheet and the icon are served; the only assets the pages load. */
export const STYLESHEET_PATH = "/dashboard/assets/style.css";
export const FAVICON_PATH = "/dashboard/assets/favicon.svg";

/**
 * Headers of every page: no script may run at all (the pages have none), styles only from this
 * origin, forms only to it, never framed; nothing cached or sent as a Referer (pages carry ids).
 */
export const PAGE_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; " +
    "frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
  "x-frame-options": "DENY",
};

export function setPageHeaders(c: Context): void {
  for (const [name, value] of Object.entries(PAGE_HEADERS)) c.header(name, value);
}

export type Shell = {
  title: string;
  /** The navigation bar (dashboard pages) or none (login, docs). */
  nav?: Html;
  body: Html;
};

export function shell({ title, nav, body }: Shell): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${title}</title>
<link rel="stylesheet" href="${STYLESHEET_PATH}">
<link rel="icon" href="${FAVICON_PATH}" type="image/svg+xml">
</head>
<body>
${nav ?? ""}
<main>
${body}
</main>
</body>
</html>`;
}

/** Inline Markdown of the OpenAPI descriptions: `code` spans only, everything else as text. */
export function inlineMarkdown(text: string | undefined): Html | string {
  if (!text) return "";
  const parts = text.split("`");
  if (parts.length < 3) return text;
  return html`${parts.map((part, i) => (i % 2 === 1 ? html`<code>${part}</code>` : part))}`;
}

/** A unix-ms time as an ISO-8601 UTC string, to the second (ms kept when not zero). */
export function formatTime(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return "";
  const iso = new Date(ms).toISOString();
  return iso.endsWith(".000Z") ? `${iso.slice(0, -5)}Z` : iso;
}

/** How far `ms` is from `now`, for a person: "in 5 min", "3 h ago". */
export function relative(ms: number | undefined, now: number): string {
  if (ms === undefined) return "";
  const delta = ms - now;
  const span = duration(Math.abs(delta));
  if (span === "0 s") return "now";
  return delta > 0 ? `in ${span}` : `${span} ago`;
}

/** A duration in ms as its largest sensible unit. */
export function duration(ms: number): string {
  const s = ms / 1000;
  if (s < 1) return "0 s";
  if (s < 120) return `${Math.floor(s)} s`;
  if (s < 7200) return `${Math.floor(s / 60)} min`;
  if (s < 172_800) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86_400)} d`;
}

export function count(n: number): string {
  return n.toLocaleString("en-US");
}

/** The JSON text of a job body: its RawJson text as stored, else the value re-encoded. */
export function bodyText(body: unknown): string {
  if (body instanceof RawJson) return body.text;
  if (body === undefined) return "";
  return JSON.stringify(body) ?? "";
}

/** The start of a body's JSON text, for one table cell. */
export function preview(text: string, max = 120): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** Nesting deeper than this is not indented further (a body nested 14,000 deep is 28 KB). */
const MAX_INDENT_LEVELS = 16;
/** Indented text longer than this (or than twice the text) is not worth it: shown as stored. */
const MAX_INDENTED_CHARS = 1024 * 1024;

/**
 * Indents JSON text without parsing it, so that what is shown is exactly what is stored: a
 * number JavaScript cannot hold (4200001234567890123) stays as the client wrote it. Levels past
 * MAX_INDENT_LEVELS are not indented further, and text whose indented form would pass
 * MAX_INDENTED_CHARS is answered as it is: the page stays linear in the body's size.
 */
export function indentJson(text: string): string {
  const most = Math.max(MAX_INDENTED_CHARS, 2 * text.length);
  let out = "";
  let depth = 0;
  let inString = false;
  const newline = () => `\n${"  ".repeat(Math.min(depth, MAX_INDENT_LEVELS))}`;
  for (let i = 0; i < text.length; i++) {
    if (out.length > most) return text;
    const ch = text[i] as string;
    if (inString) {
      out += ch;
      if (ch === "\\") out += text[++i] ?? "";
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === " " || ch === "\n" || ch === "\r" || ch === "\t") continue;
    if (ch === '"') {
      inString = true;
      out += ch;
    } else if (ch === "{" || ch === "[") {
      const close = ch === "{" ? "}" : "]";
      if (nextSolid(text, i + 1) === close) {
        out += ch + close;
        i = text.indexOf(close, i + 1);
        continue;
      }
      depth += 1;
      out += ch + newline();
    } else if (ch === "}" || ch === "]") {
      depth = Math.max(0, depth - 1);
      out += newline() + ch;
    } else if (ch === ",") {
      out += ch + newline();
    } else if (ch === ":") {
      out += ": ";
    } else {
      out += ch;
    }
  }
  return out;
}

function nextSolid(text: string, from: number): string | undefined {
  for (let i = from; i < text.length; i++) {
    const ch = text[i] as string;
    if (!/\s/.test(ch)) return ch;
  }
  return undefined;
}
