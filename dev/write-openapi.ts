// npm run openapi: writes openapi.json at the repository root, the document /openapi.json serves.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { RedisClient } from "../src/redis/runner";
import { buildService } from "../src/service";

export const OPENAPI_FILE = join(import.meta.dirname, "..", "openapi.json");

/** A Redis client that is never called: serving the document needs no Redis. */
const noRedis: RedisClient = {
  createScript: () => ({
    exec: () => Promise.reject(new Error("write-openapi: Redis is not used")),
  }),
  get: () => Promise.reject(new Error("write-openapi: Redis is not used")),
};

/**
 * The text of the document as the service serves it (built from the environment the way the
 * entry points build it), laid out by Biome as `npm run lint` wants it.
 */
export async function openApiText(): Promise<string> {
  const service = buildService(
    {
      UPSTASH_REDIS_REST_URL: "https://example.upstash.io",
      UPSTASH_REDIS_REST_TOKEN: "unused",
      DQ_TOKENS: "unused",
    },
    () => noRedis,
    { log: () => {} },
  );
  const res = await service.app.request("/openapi.json");
  if (res.status !== 200) throw new Error(`/openapi.json answered ${res.status}`);
  return biomeFormat(`${JSON.stringify(await res.json(), null, 2)}\n`);
}

function biomeFormat(text: string): string {
  const biome = join(import.meta.dirname, "..", "node_modules", ".bin", "biome");
  const run = spawnSync(biome, ["format", "--stdin-file-path=openapi.json"], {
    input: text,
    encoding: "utf8",
  });
  if (run.status !== 0) throw new Error(`biome format failed: ${run.stderr}`);
  return run.stdout;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(OPENAPI_FILE, await openApiText());
  console.log(`wrote ${OPENAPI_FILE}`);
}
