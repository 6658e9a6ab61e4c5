// The codes scripts answer with: one table, interpolated into the Lua and read by TypeScript.

/**
 * What a script reports about one job. Positive and zero codes are successes; negative ones are
 * the expected failures that `src/queue/errors.ts` turns into typed errors (exhaustively: a code
 * added here and handled nowhere fails to compile).
 */
export const CODE = {
  /** Done (added, finished, touched, ...). */
  ok: 1,
  /** add with `replace`: the job was overwritten. */
  replaced: 2,
  /** add: the id exists in this topic; the stored record is returned unchanged (a success). */
  duplicate: 0,
  /** No record with that id (never added, or past the retention window). */
  notFound: -1,
  /** add: the id is used by another topic (job_exists). */
  idTaken: -2,
  /** The job is not reserved (finish, touch, release, bury). */
  notReserved: -3,
  /** A receipt was given and is not the job's current one. */
  staleReceipt: -4,
  /** add with `replace`: refused because a consumer holds the job (job_reserved). */
  jobReserved: -5,
  /** The job's topic is outside the caller's scope. */
  forbidden: -6,
  /** pop on a push topic: its jobs are delivered, not popped. */
  pushTopic: -7,
  /** reschedule, promote: the job is not in a state they change (invalid_state). */
  invalidState: -8,
  /** reschedule: the new due time is after the job's deadline. */
  pastDeadline: -9,
} as const;

export type CodeName = keyof typeof CODE;
export type Code = (typeof CODE)[CodeName];

/** Lua: `CODE.<name>` for every code, so scripts never write a bare number. */
export const LUA_CODES = `local CODE = {${Object.entries(CODE)
  .map(([name, value]) => `${name} = ${value}`)
  .join(", ")}}`;

/** Each code's name, by its number: read once per job a script answers. */
const NAMES = new Map<number, CodeName>(
  Object.entries(CODE).map(([name, value]) => [value, name as CodeName]),
);

/** The name of a code a script answered (throws on a number no script writes: a bug). */
export function codeName(code: unknown): CodeName {
  // Only a number, or its text: Number would read a missing code (null, "") as 0, a success.
  const number =
    typeof code === "number" ? code : typeof code === "string" && code !== "" ? Number(code) : NaN;
  const name = NAMES.get(number);
  if (name === undefined) {
    throw new Error(`A delayq script answered an unknown code: ${String(code)}`);
  }
  return name;
}
