// Preloaded with NODE_OPTIONS=--import (which cannot carry --cpu-prof): profiles the process from
// its start and writes a .cpuprofile into DQ_CPU_PROFILE_DIR when it exits.
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { join } from "node:path";

const dir = process.env.DQ_CPU_PROFILE_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: 250 });
  session.post("Profiler.start");
  // A main-thread session answers synchronously, so this works inside process.exit().
  process.on("exit", () => {
    session.post("Profiler.stop", (error, result) => {
      if (!error)
        writeFileSync(join(dir, `${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
