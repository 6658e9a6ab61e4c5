// Reading jobs for DelayQueue: one job by id, and pages of a topic's jobs in one state.
import { parseInput } from "../domain/errors";
import type { JobPage } from "../domain/results";
import { type Job, JobId, type ListableState, ListInput } from "../domain/schemas";
import { scopeAllows, type TopicScope } from "../domain/scope";
import { decodeRecord } from "../redis/record";
import { notFound } from "./errors";
import type { Shared } from "./options";

/** The job with its current state; a job of a topic outside the scope is not found. */
export async function readJob(shared: Shared, scope: TopicScope, id: string): Promise<Job> {
  parseInput(JobId, id, "job id");
  const { reply: raw, now } = await shared.scripts.runTimed("get", shared.scriptNow(), [id]);
  if (raw === undefined) throw notFound(id);
  const job = decodeRecord(raw, now, shared.rawBodies);
  if (!scopeAllows(scope, job.topic)) throw notFound(id);
  return job;
}

/** A page of a topic's jobs in one state. The caller checks the topic first. */
export async function readJobPage(
  shared: Shared,
  topic: string,
  options: { state: ListableState; cursor?: string; limit?: number },
): Promise<JobPage> {
  const { state, cursor, limit } = parseInput(ListInput, options);
  const args = [topic, state, cursor ?? "", limit];
  const { reply: page, now } = await shared.scripts.runTimed("list", shared.scriptNow(), args);
  const jobs = page.records.map((raw) => decodeRecord(raw, now, shared.rawBodies));
  return page.cursor === undefined
    ? { jobs, hasMore: false }
    : { jobs, cursor: page.cursor, hasMore: true };
}
