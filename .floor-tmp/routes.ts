import { createApp } from "../src/http/app";
import { parseTokens } from "../src/http/auth";
const app = createApp({ queue: {} as any, tokens: parseTokens("t") as any });
for (const r of app.routes) console.log(r.method, r.path);
