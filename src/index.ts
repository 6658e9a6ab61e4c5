// delayq's library entry (plugin mode): the queue, the scheduler, and the domain types and errors.
export { DelayqError, ERROR_STATUS, type ErrorCode } from "./domain/errors";
export type {
  AddResult,
  BatchItemResult,
  FinishItemResult,
  JobPage,
  TickSlice,
  TopicPage,
} from "./domain/results";
export * from "./domain/schemas";
export { jsonLogger, type LogEntry, type Logger, silentLogger } from "./log";
export { DelayQueue, type DelayQueueOptions, TICK_SLICE } from "./queue";
export { keys } from "./redis/keys";
export { REDIS_CLIENT_OPTIONS, type RedisClient, redisError } from "./redis/runner";
export {
  createScheduler,
  drainStep,
  type Scheduler,
  type SchedulerStep,
  type TickOptions,
  type TickReport,
  type TickResult,
  tick,
} from "./scheduler";
