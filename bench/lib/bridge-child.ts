// The bridge as a child process of the benchmark (started by processes.ts startBridgeProcess):
// `tsx bench/lib/bridge-child.ts <redis port> <token,token,...>`, counters answered over IPC.
import { startBridge } from "../../dev/bridge";

const [port, tokens] = process.argv.slice(2);
if (!process.send || !port || !tokens) {
  console.error("bridge-child: start it with startBridgeProcess (bench/lib/processes.ts)");
  process.exit(2);
}
const bridge = await startBridge({ redisPort: Number(port), tokens: tokens.split(",") });
process.on("message", (message: { type: string; id: number; token?: string }) => {
  if (message.type === "stats") {
    process.send?.({ type: "stats", id: message.id, stats: bridge.stats(message.token) });
  }
});
const stop = () => void bridge.close().finally(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("disconnect", stop);
process.send({ type: "ready", url: bridge.url });
