// What the queue's operations answer, shared by the queue, the HTTP layer and the typed client.
import type { ErrorCode } from "./errors";
import type { Job, TopicStats } from "./schemas";

/** An add: the job, and whether this call created it (false: the id existed). */
export type AddResult = { created: boolean; job: Job };

/** One item of a batch add: added (or found), or why not. */
export type BatchItemResult = AddResult | { error: { code: ErrorCode; message: string } };

/** One item of a batch finish: finished (or finished already), or why not. */
export type FinishItemResult = { finished: true } | { error: { code: ErrorCode; message: string } };

/**
 * A page of jobs; pass `cursor` back for the next page. `hasMore` is whether there is one: a
 * `cursor` comes with it, and neither on the last page.
 */
export type JobPage = { jobs: Job[]; cursor?: string; hasMore: boolean };

/**
 * A page of topics; pass `cursor` back for the next page (the library's `after`, the API's
 * `cursor`). `hasMore` is whether there is one: a `cursor` comes with it, and neither on the last.
 */
export type TopicPage = { topics: TopicStats[]; cursor?: string; hasMore: boolean };

/** One slice of the scheduler's drain. */
export type TickSlice = {
  /** Jobs moved from delay buckets to ready lists. */
  promoted: number;
  /** Reservations whose lease ran out, taken back. */
  expired: number;
  /** Of those, jobs that died. */
  died: number;
  /** Topics visited. */
  topics: number;
  /** Whether more is due now. */
  more: boolean;
  /** Whether push jobs need claiming (the push step has work). */
  pushDue: boolean;
  /** Whether failure notices wait to be sent. */
  noticesDue: boolean;
  /** Whether recurring schedules have fires to make (the schedules step has work). */
  schedulesDue: boolean;
};
