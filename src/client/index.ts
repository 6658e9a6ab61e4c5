// delayq/client: a typed, dependency-free client of delayq's HTTP API for Node 20 and Workers.

// A push receiver checks each delivery with these (see docs/push.md, "Receiving pushes").
export {
  DEFAULT_TOLERANCE_SECONDS,
  SIGNATURE_HEADER,
  type VerifyOptions,
  verifySignature,
} from "../dispatch/signature";
export { createClient, DelayqClient } from "./client";
export { DelayqClientError, type DelayqClientErrorCode } from "./errors";
export type { ClientOptions } from "./options";
export type { FetchLike } from "./transport";
export type * from "./types";
export type { JobHandler, Worker, WorkOptions } from "./worker";
