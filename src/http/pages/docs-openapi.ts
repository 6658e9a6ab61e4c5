// The parts of an OpenAPI 3.1 document the /docs page reads, and the helpers that follow a
// schema's $ref and assemble its example.
/** The parts of an OpenAPI 3.1 document this page reads. */
export type Schema = {
  $ref?: string;
  type?: string | string[];
  format?: string;
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  description?: string;
  example?: unknown;
  examples?: unknown[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
};
export type Parameter = {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: Schema;
  example?: unknown;
};
export type Media = { schema?: Schema; example?: unknown };
export type Operation = {
  tags?: string[];
  summary?: string;
  description?: string;
  security?: unknown[];
  parameters?: Parameter[];
  requestBody?: { required?: boolean; description?: string; content?: Record<string, Media> };
  responses?: Record<string, { description?: string; content?: Record<string, Media> }>;
};
export type OpenApiDocument = {
  info: { title: string; version: string; description?: string };
  tags?: { name: string; description?: string }[];
  paths?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
};

/** The schema's example, or one assembled from its fields' examples. */
export function exampleOf(schema: Schema, doc: OpenApiDocument, depth = 0): unknown {
  const resolved = deref(schema, doc);
  if (schema.example !== undefined) return schema.example;
  if (resolved.example !== undefined) return resolved.example;
  if (depth > 3 || !resolved.properties) return undefined;
  const out: Record<string, unknown> = {};
  for (const [name, property] of Object.entries(resolved.properties)) {
    const value = exampleOf(property, doc, depth + 1);
    if (value !== undefined) out[name] = value;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

export function refName(schema: Schema): string | undefined {
  return schema.$ref?.startsWith("#/components/schemas/")
    ? schema.$ref.slice("#/components/schemas/".length)
    : undefined;
}

export function deref(schema: Schema, doc: OpenApiDocument): Schema {
  const name = refName(schema);
  return (name && doc.components?.schemas?.[name]) || schema;
}
