// zod schemas for jobs, topic config and every operation's input; the types derive from them.
// They live in a file per subject; this module gathers them so that importers need not know which.

export * from "./input-schemas";
export * from "./job-schemas";
export * from "./topic-schemas";
export * from "./value-schemas";
