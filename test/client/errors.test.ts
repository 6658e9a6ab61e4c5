// The client's errors: each documented failure as a DelayqClientError with its code and status.
import { describe, expect, it } from "vitest";
import { createClient, type FetchLike, type Job } from "../../src/client";
import { ADMIN, SHOP_A } from "../support/app";
import { BASE, failure, setup, UUID } from "./support";

describe("errors", () => {
  it("job_not_found is 404", async () => {
    const { client, sent } = setup();
    const error = await failure(client.get("missing"));
    expect(error).toMatchObject({ name: "DelayqClientError", code: "job_not_found", status: 404 });
    expect(error.message).toContain("missing");
    expect(sent).toHaveLength(1);
  });

  it("carries the answer's request id, a proxy's when it set one", async () => {
    const { client } = setup();
    const error = await failure(client.get("missing"));
    expect(error.requestId).toMatch(UUID);
    const chosen = createClient({
      baseUrl: BASE,
      token: ADMIN,
      // A proxy (or the caller's own fetch) that sets the id: delayq keeps a sane one.
      fetch: (url, init) => {
        const headers = new Headers(init?.headers);
        headers.set("x-request-id", "trace-42");
        return setup().t.app.request(String(url), { ...init, headers });
      },
    });
    expect((await failure(chosen.get("missing"))).requestId).toBe("trace-42");
  });

  it("stale_receipt is 409 and is not retried", async () => {
    const { t, client, sent } = setup();
    await client.add({ topic: "stale", id: "st-1", ttr: 10 });
    const [old] = (await client.pop("stale")) as [Job];
    t.clock.advance(11_000);
    const [again] = (await client.pop("stale")) as [Job];
    expect(again.receipt).not.toBe(old.receipt);
    const before = sent.length;
    const error = await failure(client.finish("st-1", { receipt: old.receipt }));
    expect(error).toMatchObject({ code: "stale_receipt", status: 409 });
    expect(sent.length - before).toBe(1);
    await expect(client.finish("st-1", { receipt: again.receipt })).resolves.toBeUndefined();
  });

  it("invalid_request is 400 and names the field, and is not retried", async () => {
    const { client, sent } = setup();
    const error = await failure(client.add({ topic: "v", delay: -1 }));
    expect(error).toMatchObject({ code: "invalid_request", status: 400 });
    expect(error.message).toMatch(/delay/);
    const pop = await failure(client.pop("v", { count: 0 }));
    expect(pop).toMatchObject({ code: "invalid_request", status: 400 });
    expect(pop.message).toMatch(/count/);
    expect(sent).toHaveLength(2);
  });

  it("unauthorized is 401 with a wrong token", async () => {
    const { client } = setup({ token: "not-a-token" });
    const error = await failure(client.topics());
    expect(error).toMatchObject({ code: "unauthorized", status: 401 });
  });

  it("forbidden is 403 when a scoped token acts on another topic", async () => {
    const { client } = setup({ token: SHOP_A });
    await expect(client.add({ topic: "shop-a.orders" })).resolves.toMatchObject({ created: true });
    const error = await failure(client.add({ topic: "shop-b.orders" }));
    expect(error).toMatchObject({ code: "forbidden", status: 403 });
    await failure(client.pop("shop-b.orders")).then((e) => expect(e.code).toBe("forbidden"));
  });

  it("an answer that is not delayq's is invalid_response, with its status, and not retried", async () => {
    let calls = 0;
    const html: FetchLike = async () => {
      calls++;
      return new Response("<html>Bad gateway</html>", { status: 502 });
    };
    const client = createClient({ baseUrl: BASE, token: ADMIN, fetch: html, retryDelayMs: 1 });
    const error = await failure(client.topics());
    expect(error).toMatchObject({ code: "invalid_response", status: 502 });
    expect(error.message).toContain("Bad gateway");
    expect(calls).toBe(1);

    const notJson: FetchLike = async () => new Response("ok", { status: 200 });
    const other = createClient({ baseUrl: BASE, token: ADMIN, fetch: notJson });
    await failure(other.topics()).then((e) =>
      expect(e).toMatchObject({ code: "invalid_response", status: 200 }),
    );
    const wrongShape: FetchLike = async () => Response.json({ nope: 1 });
    const third = createClient({ baseUrl: BASE, token: ADMIN, fetch: wrongShape });
    await failure(third.get("x")).then((e) =>
      expect(e).toMatchObject({ code: "invalid_response", status: 200 }),
    );
  });

  it("a bad option is a TypeError at construction", () => {
    expect(() => createClient({ baseUrl: "", token: ADMIN })).toThrow(TypeError);
    expect(() => createClient({ baseUrl: BASE, token: "" })).toThrow(TypeError);
    expect(() => createClient({ baseUrl: BASE, token: ADMIN, retries: -1 })).toThrow(/retries/);
  });
});
