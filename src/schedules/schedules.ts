// Recurring schedules (DESIGN §10): put, read, delete and list them, and make their fires. The
// cron is read here (cron.ts); the scripts (redis scripts/schedules.ts) store the schedule and
// make each fire as a job `{name}@{fire ms}`, due at the fire time, once.
import { DelayqError } from "../domain/errors";
import { RawJson, stringifyJson } from "../domain/raw-json";
import {
  MAKE_AHEAD_MS,
  MAX_FIRES_AT_ONCE,
  MAX_SCHEDULE_PAGE,
  type Schedule,
  type ScheduleInput,
} from "../domain/schedules";
import { scopeAllows, scopeToLua, type TopicScope } from "../domain/scope";
import type { ScriptRunner } from "../redis/runner";
import { type CronTimes, cronTimes } from "./cron";

/** A push topic a fire was made in (the request that made it delivers those due soon). */
export type FirePushed = { topic: string; via: "direct" | "qstash"; dueAt: number };

export type SchedulesOptions = {
  scripts: ScriptRunner;
  /** The fires' ttr (ms) and max attempts when neither the schedule nor the topic sets them. */
  defaults: { ttrMs: number; maxAttempts: number };
  /** Counts the jobs made, by schedule (delayq_schedule_fires_total). */
  count?: (schedule: string, made: number) => void;
  /**
   * Whether the scripts run on Redis's clock (the queue's `onRedisClock`: the service's), as the
   * queue's do: the cron is read at the caller's `now`, and the scripts compare and write times
   * on the one clock. @default false: the scripts take the caller's `now` (tests' own clocks)
   */
  redisClock?: boolean;
};

/** What the scheduler's step did in one call: the fires made, and whether push jobs were. */
export type MadeFires = { schedules: number; fired: number; more: boolean; pushed: FirePushed[] };

export type Schedules = {
  put(
    name: string,
    input: ScheduleInput,
    scope: TopicScope,
    now: number,
  ): Promise<{ schedule: Schedule; created: boolean; pushed: FirePushed[] }>;
  get(name: string, scope: TopicScope, now: number): Promise<Schedule>;
  delete(name: string, scope: TopicScope, now: number): Promise<void>;
  list(
    page: { after?: string; limit?: number },
    scope: TopicScope,
    now: number,
  ): Promise<{ schedules: Schedule[]; next?: string }>;
  /** Makes the fires of up to `most` schedules whose turn has come (two script calls). */
  makeDue(now: number, most: number): Promise<MadeFires>;
};

/** A schedule's spec as stored: the same input gives the same text (key order fixed). */
type Spec = {
  cron: string;
  timezone: string;
  topic: string;
  ttr?: number;
  maxAttempts?: number;
  paused: boolean;
};

type State = { createdAt: number; next?: number; last?: number; made: number[] };

/** A record's three parts: `<state JSON>\n<spec JSON>\n<body JSON>`. */
function parseRecord(raw: string): { state: State; spec: Spec; body: string } {
  const a = raw.indexOf("\n");
  const b = raw.indexOf("\n", a + 1);
  const state = JSON.parse(raw.slice(0, a)) as State;
  if (!Array.isArray(state.made)) state.made = [];
  return { state, spec: JSON.parse(raw.slice(a + 1, b)) as Spec, body: raw.slice(b + 1) };
}

/** The schedule as the API shows it at `now`. */
export function scheduleView(name: string, raw: string, now: number): Schedule {
  const { state, spec, body } = parseRecord(raw);
  let last = state.last;
  let ahead: number | undefined;
  for (const at of state.made) {
    if (at <= now) last = last === undefined ? at : Math.max(last, at);
    else ahead = ahead === undefined ? at : Math.min(ahead, at);
  }
  const view: Schedule = {
    name,
    cron: spec.cron,
    timezone: spec.timezone,
    topic: spec.topic,
    body: new RawJson(body),
    ...(spec.ttr === undefined ? {} : { ttr: spec.ttr }),
    ...(spec.maxAttempts === undefined ? {} : { maxAttempts: spec.maxAttempts }),
    paused: spec.paused,
    nextRunAt: spec.paused ? null : (ahead ?? state.next ?? null),
    createdAt: state.createdAt,
  };
  if (last !== undefined) view.lastRunAt = last;
  return view;
}

/**
 * The fires to make at `now` for a schedule whose next fire not yet made is `next` (undefined
 * for one just put): that one and those up to MAKE_AHEAD_MS ahead; when `next` has passed (the
 * ticks stopped), only the latest fire past and those ahead. Then the fire after them, and when
 * to make it.
 */
export function firesToMake(
  times: CronTimes,
  next: number | undefined,
  now: number,
): { fires: number[]; next?: number; makeAt?: number } {
  const until = now + MAKE_AHEAD_MS;
  const fires: number[] = [];
  let from = now;
  if (next !== undefined && next > until) return { fires, next, makeAt: next - MAKE_AHEAD_MS };
  if (next !== undefined && next > now) {
    fires.push(next);
    from = next;
  } else if (next !== undefined) {
    const latest = times.latest(now);
    if (latest !== undefined && latest >= next) fires.push(latest);
  }
  fires.push(...times.between(from, until, MAX_FIRES_AT_ONCE - fires.length));
  const last = fires[fires.length - 1];
  const full = fires.length >= MAX_FIRES_AT_ONCE;
  const following = times.next(full && last !== undefined ? last : until);
  return following === undefined
    ? { fires }
    : { fires, next: following, makeAt: following - MAKE_AHEAD_MS };
}

export function createSchedules(options: SchedulesOptions): Schedules {
  const { scripts, defaults } = options;
  /** The `now` the scripts take: none on Redis's clock (they read TIME). */
  const at = (now: number): number | undefined => (options.redisClock ? undefined : now);
  const count = options.count ?? (() => {});
  // Crons read once per process: a tick makes the same schedules' fires every minute.
  const parsed = new Map<string, CronTimes>();
  const timesOf = (spec: Pick<Spec, "cron" | "timezone">): CronTimes => {
    const cacheKey = `${spec.timezone} ${spec.cron}`;
    let times = parsed.get(cacheKey);
    if (!times) {
      times = cronTimes(spec.cron, spec.timezone);
      if (parsed.size >= 1000) parsed.clear();
      parsed.set(cacheKey, times);
    }
    return times;
  };
  const notFound = (name: string) =>
    new DelayqError("schedule_not_found", `Schedule ${name} does not exist`);

  return {
    async put(name, input, scope, now) {
      const spec: Spec = {
        cron: input.cron.trim(),
        timezone: input.timezone ?? "UTC",
        topic: input.topic,
        ...(input.ttr === undefined ? {} : { ttr: input.ttr }),
        ...(input.maxAttempts === undefined ? {} : { maxAttempts: input.maxAttempts }),
        paused: input.paused ?? false,
      };
      const times = timesOf(spec);
      if (times.next(now) === undefined) {
        throw new DelayqError(
          "invalid_request",
          `Invalid request: cron: "${spec.cron.slice(0, 64)}" never fires from now on`,
        );
      }
      if (!scopeAllows(scope, spec.topic)) {
        throw new DelayqError(
          "forbidden",
          `This token may not use topic ${spec.topic}: a schedule's jobs go to its topic`,
        );
      }
      const plan = spec.paused ? { fires: [] } : firesToMake(times, undefined, now);
      const reply = await scripts.run("scheduleSave", at(now), [
        name,
        JSON.stringify(spec),
        stringifyJson(input.body ?? null),
        scopeToLua(scope),
        defaults.ttrMs,
        defaults.maxAttempts,
        JSON.stringify(plan.fires),
        plan.next ?? "",
        plan.makeAt ?? "",
      ]);
      if (reply.code === "forbidden" || !("record" in reply)) {
        throw new DelayqError(
          "forbidden",
          `Schedule ${name} exists with a topic this token may not use`,
        );
      }
      if (reply.added > 0) count(name, reply.added);
      return {
        schedule: scheduleView(name, reply.record, now),
        created: reply.code === "ok",
        pushed: reply.pushed,
      };
    },

    async get(name, scope, now) {
      const raw = await scripts.run("scheduleGet", at(now), [name]);
      if (raw === undefined) throw notFound(name);
      const schedule = scheduleView(name, raw, now);
      if (!scopeAllows(scope, schedule.topic)) throw notFound(name);
      return schedule;
    },

    async delete(name, scope, now) {
      const code = await scripts.run("scheduleDelete", at(now), [name, scopeToLua(scope)]);
      if (code !== "ok") throw notFound(name);
    },

    async list(page, scope, now) {
      const limit = Math.min(page.limit ?? 100, MAX_SCHEDULE_PAGE);
      const reply = await scripts.run("scheduleList", at(now), [
        page.after ?? "",
        limit,
        scopeToLua(scope),
      ]);
      const schedules = reply.records.map(({ name, raw }) => scheduleView(name, raw, now));
      // A limited token's pages end at a name it may see: the last name read may be another's.
      const next = scope === undefined ? reply.after : reply.after && schedules.at(-1)?.name;
      return next === undefined ? { schedules } : { schedules, next };
    },

    async makeDue(now, most) {
      const due = await scripts.run("schedulesDue", at(now), [most]);
      const made: MadeFires = {
        schedules: 0,
        fired: 0,
        more: due.names.length >= most,
        pushed: [],
      };
      if (due.names.length === 0) return made;
      const args: (string | number)[] = [defaults.ttrMs, defaults.maxAttempts];
      due.names.forEach((name, i) => {
        const raw = due.records[i];
        if (!raw) return;
        const { state, spec } = parseRecord(raw);
        if (spec.paused || state.next === undefined) return;
        let plan: ReturnType<typeof firesToMake>;
        try {
          plan = firesToMake(timesOf(spec), state.next, now);
        } catch {
          // A cron this runtime no longer reads (its time zone gone): it stops making fires.
          plan = { fires: [] };
        }
        args.push(name, state.next, JSON.stringify(plan.fires), plan.next ?? "", plan.makeAt ?? "");
      });
      const reply = await scripts.run("scheduleFire", at(now), args);
      for (const { name, added } of reply.made) {
        made.schedules += 1;
        made.fired += added;
        if (added > 0) count(name, added);
      }
      made.pushed = reply.pushed;
      return made;
    },
  };
}
