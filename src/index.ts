// delayq's library entry: the queue, the scheduler tick, and the domain types and errors.
export { DelayqError, ERROR_STATUS, type ErrorCode } from "./domain/errors";
export * from "./domain/schemas";
export {
  type AddResult,
  type BatchItemResult,
  DelayQueue,
  type DelayQueueOptions,
  type JobPage,
  type TickSlice,
  type TopicPage,
} from "./queue";
export { keys } from "./redis/keys";
export { REDIS_CLIENT_OPTIONS, type RedisClient } from "./redis/scripts";
export { type TickOptions, type TickResult, tick } from "./scheduler";
