// A push receiver in Hono: checks delayq's signature on the raw body, then does the job.
import { serve } from "@hono/node-server";
import { SIGNATURE_HEADER, verifySignature } from "delayq/client";
import { Hono } from "hono";

/** The topic's push secret, from `PUT /v1/topics/{topic}` (shown once when generated). */
const secret = process.env.DELAYQ_PUSH_SECRET ?? "";

type Delivery = { id: string; topic: string; body: unknown; attempt: number; dueAt: number };

export const app = new Hono();

app.post("/hooks/delayq", async (c) => {
  // Verify the bytes as they came: parsing and re-serializing the JSON would change them.
  const raw = await c.req.text();
  if (!(await verifySignature(secret, c.req.header(SIGNATURE_HEADER), raw))) {
    return c.json({ error: "bad signature" }, 401);
  }
  const delivery = JSON.parse(raw) as Delivery;
  console.log(`job ${delivery.id} of ${delivery.topic}, attempt ${delivery.attempt}`);
  // Do the work here. Answer {"status": "retry", "delay": 30} to be called again in 30 s,
  // {"status": "bury"} to give up on the job; an error status counts as a failed attempt.
  return c.json({ status: "done" });
});

// On Cloudflare Workers, `export default app` instead of serving it here.
serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000) }, (info) => {
  console.log(`listening on ${info.port}`);
});
