// A push receiver in Express: checks delayq's signature on the raw body, then does the job.

import { SIGNATURE_HEADER, verifySignature } from "delayq/client";
import express from "express";

/** The topic's push secret, from `PUT /v1/topics/{topic}` (shown once when generated). */
const secret = process.env.DELAYQ_PUSH_SECRET ?? "";

type Delivery = { id: string; topic: string; body: unknown; attempt: number; dueAt: number };

export const app = express();

// express.raw, not express.json: the signature covers the bytes as sent, which JSON parsing and
// re-serializing would change.
app.post("/hooks/delayq", express.raw({ type: "*/*", limit: "1mb" }), async (req, res) => {
  const raw = Buffer.isBuffer(req.body) ? req.body.toString("utf8") : "";
  if (!(await verifySignature(secret, req.get(SIGNATURE_HEADER), raw))) {
    res.status(401).json({ error: "bad signature" });
    return;
  }
  const delivery = JSON.parse(raw) as Delivery;
  console.log(`job ${delivery.id} of ${delivery.topic}, attempt ${delivery.attempt}`);
  // Do the work here. Answer {"status": "retry", "delay": 30} to be called again in 30 s,
  // {"status": "bury"} to give up on the job; an error status counts as a failed attempt.
  res.json({ status: "done" });
});

const server = app.listen(Number(process.env.PORT ?? 3000), () => {
  const address = server.address();
  console.log(`listening on ${typeof address === "object" && address ? address.port : address}`);
});
