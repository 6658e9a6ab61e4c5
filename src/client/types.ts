// The client's request and response types, derived from the server's schemas (types only).
import type { z } from "zod";
import type { ErrorCode } from "../domain/errors";
import type {
  OutcomeEvent,
  Payment,
  ProviderName,
  WatchInput,
  WatchState,
} from "../domain/payments";
import type { Refund, RefundEvent, RefundInput, RefundState } from "../domain/refunds";
import type {
  AddResult,
  BatchItemResult,
  FinishItemResult,
  JobPage,
  TopicPage,
} from "../domain/results";
import type { Schedule, ScheduleInput as ScheduleInputSchema } from "../domain/schedules";
import type {
  AddJobInput,
  Backoff,
  Job,
  JobState,
  ListableState,
  TopicConfig,
  TopicConfigPatch as TopicConfigPatchSchema,
  TopicStats,
} from "../domain/schemas";
import type { Command, CommandResult } from "../protocols/youzan";

export type {
  AddJobInput,
  AddResult,
  Backoff,
  BatchItemResult,
  CommandResult,
  ErrorCode,
  FinishItemResult,
  Job,
  JobPage,
  JobState,
  ListableState,
  OutcomeEvent,
  Payment,
  ProviderName,
  Refund,
  RefundEvent,
  RefundState,
  Schedule,
  TopicConfig,
  TopicPage,
  TopicStats,
  WatchState,
};

/**
 * A topic config as sent to `PUT /v1/topics/{topic}`: like {@link TopicConfig}, but defaults
 * (an exponential backoff's `factor`) may be left out; the server fills them in.
 */
export type TopicConfigInput = z.input<typeof TopicConfig>;

/**
 * A change of some fields of a topic's config, as sent to `PATCH /v1/topics/{topic}`: a field
 * given replaces the stored one, a field set to `null` is removed, a field left out is kept.
 */
export type TopicConfigPatch = z.input<typeof TopicConfigPatchSchema>;

/**
 * A payment watch as sent to `POST /v1/payments`: `{provider, account, outTradeNo, notify}`,
 * plus `schedule`, `deadline`, `closeOnDeadline` and `metadata` when wanted.
 */
export type WatchPaymentInput = WatchInput;

/** A watch's start: the watch, and whether this call started it (false: it was watched already). */
export type WatchResult = { created: boolean; payment: Payment };

/**
 * A refund watch as sent to `POST /v1/refunds`: `{provider, account, outRefundNo, notify}`, plus
 * `outTradeNo` (required for Alipay), `schedule`, `deadline` and `metadata` when wanted.
 */
export type WatchRefundInput = RefundInput;

/** A refund watch's start: the watch, and whether this call started it. */
export type WatchRefundResult = { created: boolean; refund: Refund };

/**
 * A recurring schedule as sent to `PUT /v1/schedules/{name}`: `{cron, topic}`, plus `timezone`
 * (an IANA name, default UTC), `body`, `ttr`, `maxAttempts` and `paused` when wanted.
 */
export type ScheduleInput = z.input<typeof ScheduleInputSchema>;

/** A page of `GET /v1/schedules`: `cursor` for the next page while `hasMore`. */
export type SchedulePage = { schedules: Schedule[]; cursor?: string; hasMore: boolean };

/** Options of `listSchedules`. */
export type ListSchedulesOptions = {
  /** The previous page's `cursor`, or any name: list the schedules named after it. */
  cursor?: string;
  /** Schedules per page, 1 to 1000. @default 100 */
  limit?: number;
};

/**
 * One command of the `POST /v1/command` protocol, as sent: `{command: "add" | "pop" | "finish" |
 * "delete" | "get" | "touch" | "release" | "bury" | "reschedule" | "promote", ...}`.
 */
export type CommandInput = z.input<typeof Command>;

/** `GET /health`: up with Redis reachable, or up with Redis unreachable (HTTP 503). */
export type Health =
  | { status: "ok"; redis: "ok" }
  | { status: "degraded"; redis: "unreachable"; message?: string };

/** The new due time of `reschedule`: `delay` seconds from now, or `runAt`. */
export type RescheduleOptions =
  | { delay: number; runAt?: never }
  | { runAt: number | string; delay?: never };

/** Options of `pop`. */
export type PopOptions = {
  /** How many jobs to reserve, 1 to 100. @default 1 */
  count?: number;
  /** Seconds to wait for a job when none is ready (long-poll), up to 20. @default 0 */
  wait?: number;
  /**
   * Ends the request early; the call then rejects with the signal's reason. Jobs the server had
   * already reserved for this call come back to the topic after their TTR.
   */
  signal?: AbortSignal;
};

/** Which dead jobs `kick` moves back to ready: these ids, or the `count` oldest (default 1000). */
export type KickOptions = { ids: string[]; count?: never } | { count?: number; ids?: never };

/** Options of `listJobs`. */
export type ListJobsOptions = {
  state: ListableState;
  /** The `cursor` of the previous page. */
  cursor?: string;
  /** Jobs per page, 1 to 1000. @default 100 */
  limit?: number;
};

/** Options of `topics`. */
export type TopicsOptions = {
  /**
   * The `cursor` of the previous page. A token not limited to topics may also give a name (the
   * topics after it); a limited token only the cursors it was given.
   */
  cursor?: string;
  /** @deprecated The former name of `cursor`; give one of the two. */
  after?: string;
  /** Topics per page, 1 to 100. @default 100 */
  limit?: number;
};
