// What the scripts answer and the facts their callers share with the Lua: the face of src/redis
// that the queue, the dispatcher and payment watches read, so that none of them reaches into
// src/redis/lua (they run scripts by name through the one ScriptRunner, src/redis/runner.ts).

export { LISTEN_HOLD_MS, LISTEN_REFRESH_MS } from "./lua/lib/topic";
export type { AddReply } from "./lua/scripts/add";
export type { HeldReply } from "./lua/scripts/held";
export type { ListReply } from "./lua/scripts/list";
export {
  PAYMENTS_TOPIC,
  PAYMENTS_TOPIC_CONFIG,
  REFUNDS_TOPIC,
  REFUNDS_TOPIC_CONFIG,
  type WatchIndex,
  type WatchList,
  type WatchRecord,
} from "./lua/scripts/payments";
export type { PopReply } from "./lua/scripts/pop";
export {
  type ClaimedTopic,
  type HandOffWave,
  NOTICE_RETRY_MS,
  type Notice,
  renoticeArgs,
  type SettleOutcome,
  type SettleReply,
  type Unsent,
} from "./lua/scripts/push";
export type { MoveReply } from "./lua/scripts/reschedule";
export type { ConfigureReply, TopicRow } from "./lua/scripts/topics";
