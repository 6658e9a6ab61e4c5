// Waiting for a due time by the clock that set it: a timer may fire a little early by that clock
// (Node rounds timers to the millisecond on its own monotonic clock), so look again and wait more.

/** Resolves once `clock()` has reached `due`, never before. */
export async function until(due: number, clock: () => number): Promise<void> {
  for (let wait = due - clock(); wait > 0; wait = due - clock()) {
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}
