// The dashboard's shared vocabulary: the View a page renders from, the actions it posts, its
// limits, and the links and paths it builds (imported by its pages, actions and pieces).
import type { Context } from "hono";
import type { ListableState } from "../../domain/schemas";
import type { DelayQueue } from "../../queue";
import type { AppEnv } from "../context";
import type { TopicCursors } from "../topic-cursors";
import type { DashboardSession } from "./session";

/** Rows per page: topics on the overview, jobs on a topic's page. */
export const DASHBOARD_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 100;
/** Dead jobs one "kick all" or "delete all" acts on (one script call). */
export const BULK = 1000;
export const STATES: readonly ListableState[] = ["ready", "delayed", "reserved", "dead"];

export type Action =
  | "kick"
  | "kick-dead"
  | "delete"
  | "delete-dead"
  | "bury"
  | "pause"
  | "resume"
  | "promote"
  | "reschedule";
export const ACTIONS: readonly Action[] = [
  "kick",
  "kick-dead",
  "delete",
  "delete-dead",
  "bury",
  "pause",
  "resume",
  "promote",
  "reschedule",
];
/**
 * Actions that lose or move work ask first; pause and resume are undone with one click, and so
 * are promote and reschedule (a reschedule puts a job back).
 */
export const CONFIRMED: ReadonlySet<Action> = new Set([
  "kick",
  "kick-dead",
  "delete",
  "delete-dead",
  "bury",
]);

export type View = {
  c: Context<AppEnv>;
  session: DashboardSession;
  queue: DelayQueue;
  /** Topic pages' cursors (topicCursors). */
  cursors: TopicCursors;
};

const enc = encodeURIComponent;
export const topicHref = (topic: string, query?: Record<string, string>) =>
  `/dashboard/topics/${enc(topic)}${query ? `?${new URLSearchParams(query)}` : ""}`;
export const jobHref = (id: string) => `/dashboard/jobs/${enc(id)}`;

export function pageSize(value: string | undefined): number {
  const n = Number.parseInt(value ?? "", 10);
  if (!Number.isFinite(n)) return DASHBOARD_PAGE_SIZE;
  return Math.min(MAX_PAGE_SIZE, Math.max(1, n));
}

/** The current page's path and query, without the notice of a previous action. */
export function here(c: Context): string {
  const url = new URL(c.req.url);
  url.searchParams.delete("done");
  url.searchParams.delete("n");
  return `${url.pathname}${url.search}`;
}

/** Where to go after an action: a dashboard path of this site, never anywhere else. */
export function safeBack(value: string, fallback: string): string {
  if (!value) return fallback;
  try {
    const base = "http://dashboard.invalid";
    const url = new URL(value, base);
    const inside = url.pathname === "/dashboard" || url.pathname.startsWith("/dashboard/");
    if (url.origin !== base || !inside || !value.startsWith("/dashboard")) return fallback;
    url.searchParams.delete("done");
    url.searchParams.delete("n");
    return `${url.pathname}${url.search}`;
  } catch {
    return fallback;
  }
}
