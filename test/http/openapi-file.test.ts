// openapi.json at the root is what /openapi.json serves, and every field in it is documented.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { OPENAPI_FILE, openApiText } from "../../dev/write-openapi";
import { DelayqClient } from "../../src/client/client";
import { testApp } from "../support/app";

type Schema = {
  $ref?: string;
  description?: string;
  example?: unknown;
  type?: string | string[];
  properties?: Record<string, Schema>;
  items?: Schema;
  [key: string]: unknown;
};
type Doc = {
  paths: Record<string, unknown>;
  components: { schemas: Record<string, Schema> };
  tags?: { name: string; description?: string }[];
  servers?: { url: string; description?: string; variables?: Record<string, unknown> }[];
};
type Operation = { operationId?: string; tags?: string[]; summary?: string };

/** Every operation of the document: method, path and the operation object. */
function operationsOf(doc: Doc): { where: string; op: Operation }[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item as Record<string, Operation>).map(([method, op]) => ({
      where: `${method.toUpperCase()} ${path}`,
      op,
    })),
  );
}

/**
 * The TS client's methods and the operation each calls: an SDK generated from the document
 * names its methods by operationId, so those match the client's names, a bare verb on a job
 * taking the noun (`add` → addJob, `get` → getJob, `topics` → listTopics).
 */
const CLIENT_OPERATIONS: Record<string, string> = {
  add: "addJob",
  addBatch: "addBatch",
  get: "getJob",
  delete: "deleteJob",
  pop: "pop",
  finishAndPop: "pop",
  finish: "finishJob",
  finishMany: "finishMany",
  touch: "touchJob",
  release: "releaseJob",
  bury: "buryJob",
  reschedule: "rescheduleJob",
  promote: "promoteJob",
  kick: "kick",
  deleteDead: "deleteDead",
  topics: "listTopics",
  topic: "getTopic",
  listJobs: "listJobs",
  configureTopic: "configureTopic",
  updateTopic: "updateTopic",
  watchPayment: "watchPayment",
  getPayment: "getPayment",
  stopPayment: "stopPayment",
  watchRefund: "watchRefund",
  getRefund: "getRefund",
  stopRefund: "stopRefund",
  putSchedule: "putSchedule",
  getSchedule: "getSchedule",
  deleteSchedule: "deleteSchedule",
  listSchedules: "listSchedules",
  command: "runCommand",
  health: "getHealth",
};
/** The client's methods that call no one operation: `work` loops over pop and finish. */
const CLIENT_HELPERS = new Set(["constructor", "work", "call", "verb"]);

/**
 * A property: where it sits (for messages: `Job.dueAt`, `POST /v1/jobs/{id}/finish.finished`),
 * and the example an enclosing schema gives for it, if any.
 */
type Property = { where: string; name: string; schema: Schema; inherited: unknown };

/** Every property of every object schema in the document, components and inline ones alike. */
function properties(doc: Doc): Property[] {
  const found: Property[] = [];
  const child = (example: unknown, key: string | number): unknown =>
    example !== null && typeof example === "object"
      ? (example as Record<string | number, unknown>)[key]
      : undefined;
  const walk = (node: unknown, where: string, inherited: unknown) => {
    if (Array.isArray(node)) {
      for (const [i, item] of node.entries()) walk(item, `${where}[${i}]`, inherited);
      return;
    }
    if (node === null || typeof node !== "object") return;
    const schema = node as Schema;
    const example = schema.example ?? inherited;
    for (const [key, value] of Object.entries(schema)) {
      if (key === "properties" && value && typeof value === "object") {
        for (const [name, property] of Object.entries(value as Record<string, Schema>)) {
          const given = child(example, name);
          found.push({ where, name, schema: property, inherited: given });
          walk(property, `${where}.${name}`, given);
        }
      } else if (key === "items") {
        walk(value, where, child(example, 0));
      } else if (key !== "example" && key !== "examples") {
        walk(value, where, example);
      }
    }
  };
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    walk(schema, name, undefined);
  }
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations as Record<string, unknown>)) {
      walk(operation, `${method.toUpperCase()} ${path}`, undefined);
    }
  }
  return found;
}

function component(doc: Doc, ref: string | undefined): Schema | undefined {
  return ref?.startsWith("#/components/schemas/")
    ? doc.components.schemas[ref.slice("#/components/schemas/".length)]
    : undefined;
}

/** A description on the property, or on the component it refers to (itself or its items). */
function described(doc: Doc, schema: Schema): boolean {
  if (schema.description) return true;
  return Boolean(component(doc, schema.$ref ?? schema.items?.$ref)?.description);
}

/**
 * An example for the property: its own, one an enclosing schema's example gives for it, the
 * example of the component it refers to, or one its values give (a boolean, an enum, a constant).
 */
function exemplified(doc: Doc, { schema, inherited }: Property): boolean {
  if (schema.example !== undefined || schema.examples !== undefined) return true;
  if (inherited !== undefined) return true;
  if (component(doc, schema.$ref ?? schema.items?.$ref)?.example !== undefined) return true;
  return schema.type === "boolean" || Array.isArray(schema.enum) || "const" in schema;
}

/** A number, or a union with a number in it (unix ms or an ISO date-time). */
function numeric(schema: Schema): boolean {
  const branches = [schema, ...((schema.anyOf ?? schema.oneOf ?? []) as Schema[])];
  return branches.some((branch) => /number|integer/.test(JSON.stringify(branch.type ?? "")));
}

const UNIT = /\b(unix ms|ms|milliseconds?|seconds?|unix seconds)\b/i;
/** Number fields whose name says they are a time or a duration: their unit must be stated. */
const TIMED = /(At|Until)$|^(delay|ttr|wait|timeout|deadline|max|notBefore)$/;

describe("openapi.json", () => {
  it("is what the service serves at /openapi.json", async () => {
    const committed = readFileSync(OPENAPI_FILE, "utf8");
    expect(
      committed === (await openApiText()),
      "openapi.json is out of date: run npm run openapi",
    ).toBe(true);
  });

  it("holds every route the app serves", async () => {
    const { call } = testApp();
    const served = (await call("GET", "/openapi.json", { token: null })).json as Doc;
    const committed = JSON.parse(readFileSync(OPENAPI_FILE, "utf8")) as Doc;
    for (const path of Object.keys(served.paths)) {
      expect(Object.keys(committed.paths), "run npm run openapi").toContain(path);
    }
  });

  const doc = JSON.parse(readFileSync(OPENAPI_FILE, "utf8")) as Doc;
  const all = properties(doc);

  it("lists the statuses these routes really answer (found by a black-box pass)", () => {
    const responses = (path: string, method: string) =>
      Object.keys(
        ((doc.paths[path] as Record<string, { responses: Record<string, unknown> }>)[method]
          ?.responses ?? {}) as Record<string, unknown>,
      );
    expect(responses("/v1/topics/{topic}/pop", "post")).toContain("409"); // push_topic
    expect(responses("/v1/qstash/callback", "post")).toContain("400"); // no id or receipt
    expect(responses("/v1/topics", "get")).toEqual(expect.arrayContaining(["400", "401"]));
    expect(responses("/v1/payments", "post")).toEqual(expect.arrayContaining(["409", "413"]));
  });

  it("names every operation with a unique camelCase operationId, a verb first", () => {
    const ops = operationsOf(doc);
    expect(ops.length).toBeGreaterThanOrEqual(27);
    const missing = ops.filter(({ op }) => !op.operationId).map(({ where }) => where);
    expect(missing, "add operationId to these routes").toEqual([]);
    const ids = ops.map(({ op }) => op.operationId as string);
    expect(
      ids.filter((id, i) => ids.indexOf(id) !== i),
      "operationIds used twice",
    ).toEqual([]);
    for (const id of ids) expect(id).toMatch(/^[a-z]+([A-Z][a-z]*)*$/);
  });

  it("names the operations the TS client calls after the client's methods", () => {
    const ids = new Set(operationsOf(doc).map(({ op }) => op.operationId));
    const methods = Object.getOwnPropertyNames(DelayqClient.prototype).filter(
      (name) => !CLIENT_HELPERS.has(name),
    );
    expect(methods.sort()).toEqual(Object.keys(CLIENT_OPERATIONS).sort());
    for (const [method, id] of Object.entries(CLIENT_OPERATIONS)) {
      expect(ids, `DelayqClient.${method}`).toContain(id);
    }
    // Where the client's name is already a verb on its object, the id is that name.
    for (const same of ["addBatch", "pop", "finishMany", "kick", "deleteDead", "listJobs"]) {
      expect(CLIENT_OPERATIONS[same]).toBe(same);
    }
  });

  it("describes every tag an operation uses, and uses every tag it describes", () => {
    const used = new Set(operationsOf(doc).flatMap(({ op }) => op.tags ?? []));
    const described = new Map((doc.tags ?? []).map((tag) => [tag.name, tag.description]));
    for (const { where, op } of operationsOf(doc)) {
      expect(op.tags?.length ?? 0, `${where} has no tag`).toBeGreaterThan(0);
    }
    for (const tag of used) expect(described.get(tag), `tag "${tag}"`).toMatch(/\w+ \w+/);
    expect([...described.keys()].sort()).toEqual([...used].sort());
  });

  it("names the servers: a Workers deployment and the local one", () => {
    const urls = (doc.servers ?? []).map((server) => server.url);
    expect(urls).toEqual(["https://delayq.{subdomain}.workers.dev", "http://127.0.0.1:8787"]);
    for (const server of doc.servers ?? []) expect(server.description).toBeTruthy();
  });

  it("documents the providers' notification routes and /metrics, served without the API's JSON", () => {
    const op = (path: string, method: string) =>
      (doc.paths[path] as Record<string, Operation & Record<string, unknown>> | undefined)?.[
        method
      ];
    const alipay = op("/v1/notify/alipay/{account}", "post");
    const wechatpay = op("/v1/notify/wechatpay/{account}", "post");
    const metrics = op("/metrics", "get");
    expect(alipay?.operationId).toBe("notifyAlipay");
    expect(wechatpay?.operationId).toBe("notifyWechatpay");
    expect(metrics?.operationId).toBe("getMetrics");
    // The providers authenticate by their signatures: no bearer token.
    expect(alipay?.security).toBeUndefined();
    expect(wechatpay?.security).toBeUndefined();
    expect(metrics?.security).toEqual([{ bearer: [] }]);
    expect(JSON.stringify(alipay?.requestBody)).toContain("application/x-www-form-urlencoded");
    expect(JSON.stringify(metrics?.responses)).toContain("text/plain; version=0.0.4");
  });

  it("describes every field of every schema", () => {
    expect(all.length).toBeGreaterThan(100);
    const missing = all.filter((p) => !described(doc, p.schema)).map((p) => `${p.where}.${p.name}`);
    expect(missing, "add .meta({ description }) to these fields").toEqual([]);
  });

  it("gives an example for every field", () => {
    const missing = all.filter((p) => !exemplified(doc, p)).map((p) => `${p.where}.${p.name}`);
    expect(missing, "add .meta({ example }) to these fields (or to their object)").toEqual([]);
  });

  it("states the unit of every time and duration", () => {
    const timed = all.filter((p) => TIMED.test(p.name) && numeric(p.schema));
    expect(timed.length).toBeGreaterThan(10);
    const missing = timed
      .filter((p) => !UNIT.test(p.schema.description ?? ""))
      .map((p) => `${p.where}.${p.name}: ${p.schema.description}`);
    expect(missing, "say the unit (seconds, unix ms) in these descriptions").toEqual([]);
  });
});
