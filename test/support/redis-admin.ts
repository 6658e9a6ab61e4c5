// Setting up and reading a real redis-server from a test, beside the client under test.
import { type Reply, RespConnection } from "../../dev/resp";

/** One RESP command on a fresh connection, for setting a server up; an error reply throws. */
export async function admin(port: number, ...command: string[]): Promise<Reply> {
  const connection = await RespConnection.open(port);
  try {
    const reply = await connection.call(...command);
    if (reply.type === "error") throw new Error(`${command[0]}: ${reply.message}`);
    return reply;
  } finally {
    connection.close();
  }
}

/** How many times Redis ran each command (INFO commandstats), e.g. { evalsha: 3, "function|load": 1 }. */
export async function commandCounts(port: number): Promise<Record<string, number>> {
  const reply = await admin(port, "INFO", "commandstats");
  const text = reply.type === "bulk" ? String(reply.value) : "";
  const counts: Record<string, number> = {};
  for (const [, name, calls] of text.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) {
    counts[name as string] = Number(calls);
  }
  return counts;
}
