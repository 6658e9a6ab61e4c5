// Helpers of the suites inside workerd: the API called through the worker itself (SELF), with the
// admin token the workerd project's bindings give (vitest.workers.config.ts).
import { SELF } from "cloudflare:test";

export const AUTH = { authorization: "Bearer worker-admin" };

/** Calls the API through the worker; answers the status and the parsed JSON. */
export async function call(method: string, path: string, body?: unknown) {
  const res = await SELF.fetch(`http://delayq.test${path}`, {
    method,
    headers: AUTH,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as any };
}
