import { createApp } from "../src/http/app";
import { parseTokens } from "../src/http/auth";
import { RegExpRouter } from "hono/router/reg-exp-router";
const app = createApp({ queue: {} as any, tokens: parseTokens("t") as any });
const seen: any[] = [];
for (const route of app.routes) {
  seen.push(route);
  const rr = new RegExpRouter<any>();
  try { for (const s of seen) rr.add(s.method, s.path, 1); rr.match("GET", "/x"); } catch (e) { console.log("breaks at:", route.method, route.path, String(e)); seen.pop(); }
}
console.log(app.routes.length);
