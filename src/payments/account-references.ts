// A key or certificate field of an account may name the variable that holds it, {"env": "NAME"},
// instead of holding the text: a Worker's variables (secrets included) hold at most 5 KB each,
// and a certificate-mode Alipay account (three certificates, two with their intermediates, and
// a key) is about twice that. Each part can then be a secret of its own.

/** The fields whose value may be a reference (platformCertificates: each of its entries). */
const REFERENCE_FIELDS = new Set([
  "privateKey",
  "alipayPublicKey",
  "appCert",
  "alipayCert",
  "alipayRootCert",
  "platformPublicKey",
  "platformCertificates",
]);

const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

type Resolved = { value: unknown } | { problem: string };

/** One value: a reference replaced by its variable's text; anything else as it is. */
function resolve(field: string, value: unknown, env: Readonly<Record<string, unknown>>): Resolved {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { value };
  const keys = Object.keys(value);
  const name = (value as { env?: unknown }).env;
  if (keys.length !== 1 || typeof name !== "string" || !VARIABLE_NAME.test(name)) {
    return {
      problem: `"${field}" must be text, or {"env": "<VARIABLE>"} naming the variable that holds it`,
    };
  }
  const text = env[name];
  if (typeof text !== "string" || text.trim() === "") {
    return { problem: `"${field}" names the variable ${name}, which is not set` };
  }
  return { value: text };
}

/**
 * The account with each reference of a key or certificate field replaced by the text of the
 * variable it names, and what could not be resolved (said by field and variable name, never by
 * value). What is not an object is answered as it is (the schema says what is wrong with it).
 */
export function resolveReferences(
  account: unknown,
  env: Readonly<Record<string, unknown>>,
): { account: unknown; problems: string[] } {
  if (typeof account !== "object" || account === null || Array.isArray(account)) {
    return { account, problems: [] };
  }
  const problems: string[] = [];
  const take = (field: string, value: unknown): unknown => {
    const resolved = resolve(field, value, env);
    if ("problem" in resolved) problems.push(resolved.problem);
    return "value" in resolved ? resolved.value : value;
  };
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(account)) {
    if (!REFERENCE_FIELDS.has(field)) out[field] = value;
    else if (field === "platformCertificates" && Array.isArray(value)) {
      out[field] = value.map((entry, index) => take(`${field}.${index}`, entry));
    } else out[field] = take(field, value);
  }
  return { account: out, problems };
}
