// The adapter contract every benchmarked system implements (the peers here, delayq's own later).

/** The body of every benchmark job: about 100 bytes of JSON. */
export type JobBody = { order: number; note: string };

export type NewJob = {
  body: JobBody;
  /** When the job may first be delivered, in ms since the epoch; absent means at once. */
  dueAt?: number;
};

export type BenchContext = {
  /** The fresh redis-server this session must use, on 127.0.0.1. */
  redisPort: number;
  /** Notes while running; goes to stderr, so it never mixes with the results on stdout. */
  log(message: string): void;
};

export type ConsumeOptions = {
  /**
   * How many jobs may be in hand at once: a worker's concurrency, a number of polling loops, or
   * lease slots for a system that pops many at a time.
   */
  concurrency: number;
  /**
   * The harness's work for one job, called as soon as the system hands the job over (the
   * harness reads the clock here). The adapter finishes the job (completes, acks, deletes) after
   * it resolves, the way the system's normal consumer does.
   */
  handle(body: JobBody): void | Promise<void>;
};

export type Consumers = {
  /** Stops taking jobs, lets jobs in hand finish, and closes what `consume` opened. */
  stop(): Promise<void>;
};

export type SystemSession = {
  /**
   * Stores jobs and resolves once all are stored. The harness calls it with batches of up to
   * `batchSize` (100) jobs; use the system's bulk add for a batch where it has one.
   */
  add(jobs: readonly NewJob[]): Promise<void>;
  /**
   * Starts the system's normal consumers with its default polling or blocking, plus any
   * scheduler or timer the system needs in production (promotion of delayed jobs, a cron tick).
   */
  consume(options: ConsumeOptions): Promise<Consumers>;
  /**
   * Requests the system's clients have sent so far, cumulative. Implement it only when requests
   * are not visible as Redis commands (e.g. clients talk HTTP to a bridge); without it the
   * harness counts the commands clients send to Redis with MONITOR.
   */
  requests?(): Promise<number>;
  /** Closes every connection and timer the session opened, so that the process can exit. */
  close(): Promise<void>;
};

export type SystemAdapter = {
  /** Short name used as the table row and the JSON key: "bullmq", "bee-queue", "rsmq". */
  name: string;
  /** Choices the adapter made that a reader must know (options set, polling policy), and why. */
  notes: readonly string[];
  /**
   * Opens a session against a fresh, empty redis-server: clients, queue creation, script
   * loading. Each workload gets its own server and its own session.
   */
  open(context: BenchContext): Promise<SystemSession>;
};
