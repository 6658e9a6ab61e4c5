import { RegExpRouter } from "hono/router/reg-exp-router";
const combos = [
 [["POST","/v1/jobs/:id/finish"],["POST","/v1/jobs/batch"]],
 [["POST","/v1/jobs/batch"],["POST","/v1/jobs/:id"]],
 [["POST","/v1/jobs/batch"],["POST","/v1/jobs/:id/x"]],
 [["GET","/a/b"],["POST","/a/:id/x"]],
];
for (const c of combos) { const r = new RegExpRouter<any>(); try { for (const [m,p] of c) r.add(m,p,1); console.log(JSON.stringify(r.match("POST","/v1/jobs/batch")[0].map((x:any)=>x[0]))); console.log("ok", JSON.stringify(c)); } catch(e) { console.log("FAIL", JSON.stringify(c), String(e)); } }
