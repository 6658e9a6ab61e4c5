// The registry of scripts: one file per transition, each with its Lua and its reply parser.
import { LUA_LIB } from "../lib";
import { libraryFor, statementsOf } from "../lib/shake";
import type { Script } from "../script";
import { add } from "./add";
import { deleteDead, kick } from "./dead-letter";
import { deleteJob } from "./delete";
import { getJob } from "./get";
import { bury, finish, release, touch } from "./held";
import { list } from "./list";
import {
  endedTake,
  idClaim,
  idForget,
  idWhere,
  layoutMark,
  outboxApply,
  outboxDone,
  outboxRead,
} from "./partitions";
import {
  tokenWatchCounts,
  watchList,
  watchPolled,
  watchRead,
  watchStart,
  watchStop,
} from "./payments";
import { pop } from "./pop";
import { claim, handOff, notices, published, renotice, settle, stillHeld } from "./push";
import { promote, reschedule } from "./reschedule";
import {
  scheduleDelete,
  scheduleFire,
  scheduleGet,
  scheduleList,
  scheduleSave,
  schedulesDue,
} from "./schedules";
import { sessionEnd, sessionRead, sessionStart } from "./sessions";
import { tick } from "./tick";
import { configure, cursorSecret, listTopics, topicStats } from "./topics";

export const SCRIPTS = {
  add,
  pop,
  finish,
  touch,
  release,
  bury,
  reschedule,
  promote,
  delete: deleteJob,
  get: getJob,
  kick,
  deleteDead,
  list,
  topicStats,
  listTopics,
  cursorSecret,
  configure,
  tick,
  claim,
  handOff,
  settle,
  published,
  stillHeld,
  notices,
  renotice,
  watchStart,
  watchRead,
  watchPolled,
  watchStop,
  watchList,
  tokenWatchCounts,
  sessionStart,
  sessionRead,
  sessionEnd,
  scheduleSave,
  scheduleGet,
  scheduleDelete,
  scheduleList,
  schedulesDue,
  scheduleFire,
  idClaim,
  idWhere,
  idForget,
  endedTake,
  outboxRead,
  outboxApply,
  outboxDone,
  layoutMark,
} as const;

export type ScriptName = keyof typeof SCRIPTS;

const LIBRARY = statementsOf(LUA_LIB);
const texts = new WeakMap<Script<unknown>, string>();

/**
 * The full text of a script as sent to Redis: the part of the shared library it calls
 * (lib/shake.ts), then the script (`timed` when it reads the clock).
 */
export function scriptText(script: Script<unknown>): string {
  let text = texts.get(script);
  if (text === undefined) {
    const lib = libraryFor(LIBRARY, script.lua);
    text = `${lib}\n${readsClock(lib) ? timed(script.lua) : script.lua}`;
    texts.set(script, text);
  }
  return text;
}

/** Whether a script's library defines NOW: it compares or writes times. */
function readsClock(lib: string): boolean {
  return /^local NOW =/m.test(lib);
}

/** The scripts that use NOW, by name: called on Redis's clock, they answer it first. */
export const TIMED: ReadonlySet<ScriptName> = new Set(
  (Object.keys(SCRIPTS) as ScriptName[]).filter((name) =>
    readsClock(libraryFor(LIBRARY, SCRIPTS[name].lua)),
  ),
);

/**
 * A script's body as a function whose reply, when the call asked for Redis's clock (ARGV[2]
 * ""), comes after the time the script ran at: {NOW, reply}. The caller then dates what it
 * answers (a job's state, ready or delayed) by the clock the script used.
 */
export function timed(lua: string): string {
  return `local function main()\n${lua}\nend\nif ARGV[2] == "" then return {NOW, main()} end\nreturn main()`;
}

/** Every script's full text, by name (for SCRIPT LOAD in tools and benchmarks). */
export function scriptTexts(): Record<ScriptName, string> {
  return Object.fromEntries(
    Object.entries(SCRIPTS).map(([name, script]) => [name, scriptText(script)]),
  ) as Record<ScriptName, string>;
}
