// The queue room: DelayQueue (the public facade) and what it is built from.
export { DelayQueue, TICK_SLICE } from "./delay-queue";
export {
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_BODY_BYTES,
  DEFAULT_RETENTION_SECONDS,
  DEFAULT_TTR_SECONDS,
  type DelayQueueOptions,
} from "./options";
