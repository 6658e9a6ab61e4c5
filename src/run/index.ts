// One invocation's run (clock, subrequest budget, deferred work, logger) and the work it drains.
export { type Budget, createBudget } from "./budget";
export { createRun, type Run, type RunOptions } from "./run";
export { beforeNextTick, notices, soon, type Work } from "./work";
