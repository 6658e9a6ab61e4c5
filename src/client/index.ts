// delayq/client: a typed, dependency-free client of delayq's HTTP API for Node 20 and Workers.
export { type ClientOptions, createClient, DelayqClient } from "./client";
export { DelayqClientError, type DelayqClientErrorCode } from "./errors";
export type { FetchLike } from "./transport";
export type * from "./types";
