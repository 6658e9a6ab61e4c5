// The stylesheet and icon of the dashboard and the docs page, served by the service itself (no CDN).

export const STYLESHEET = `
:root{--fg:#1d2330;--muted:#5b6475;--line:#dde1e8;--bg:#f6f7f9;--card:#fff;--accent:#1f5fbf;
--ok:#16794c;--warn:#9a5b00;--bad:#b42318;--code:#f1f3f6}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg)}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
header.top{display:flex;gap:1.5rem;align-items:center;padding:.6rem 1.5rem;background:#1d2330;
color:#fff;flex-wrap:wrap}
header.top a{color:#dbe6ff}header.top .brand{font-weight:700;color:#fff;font-size:1.05rem}
header.top nav{display:flex;gap:1rem;flex:1}header.top form{margin:0}
header.top .who{color:#aab3c5;font-size:.85rem}
main{max-width:1200px;margin:0 auto;padding:1.2rem 1.5rem 3rem}
h1{font-size:1.4rem;margin:.4rem 0 1rem}h2{font-size:1.1rem;margin:1.6rem 0 .6rem}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1rem 1.2rem;
margin:0 0 1rem}
table{border-collapse:collapse;width:100%;background:var(--card)}
th,td{text-align:left;padding:.4rem .6rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:.8rem;text-transform:uppercase;letter-spacing:.02em}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
tr:hover td{background:#fafbfd}
code,pre,.mono{font:12.5px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
code{background:var(--code);padding:.05rem .3rem;border-radius:4px}
pre{background:var(--code);padding:.7rem .9rem;border-radius:6px;overflow:auto;max-height:32rem;
margin:.3rem 0}
pre code{background:none;padding:0}
.preview{max-width:28rem;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;display:block}
.muted{color:var(--muted)}.small{font-size:.85rem}
.badge{display:inline-block;padding:.05rem .5rem;border-radius:999px;font-size:.78rem;
font-weight:600;background:#e8ecf3;color:#36405a}
.badge.paused{background:#fff1d6;color:var(--warn)}.badge.dead{background:#fde7e5;color:var(--bad)}
.badge.ready{background:#ddf4e8;color:var(--ok)}.badge.reserved{background:#e1ecff;color:#1f4f9f}
.badge.delayed{background:#eeeaf9;color:#4f3b99}
.badge.get{background:#ddf4e8;color:var(--ok)}.badge.post{background:#e1ecff;color:#1f4f9f}
.badge.put{background:#fff1d6;color:var(--warn)}.badge.delete{background:#fde7e5;color:var(--bad)}
.tabs{display:flex;gap:.3rem;margin:.8rem 0;flex-wrap:wrap}
.tabs a{padding:.35rem .8rem;border:1px solid var(--line);border-radius:6px;background:var(--card)}
.tabs a.on{background:var(--accent);color:#fff;border-color:var(--accent)}
.row{display:flex;gap:.6rem;align-items:center;flex-wrap:wrap}
form.inline{display:inline;margin:0}
input[type=text],input[type=password],input[type=number]{padding:.4rem .55rem;border:1px solid #c5cbd6;
border-radius:6px;font:inherit;min-width:14rem}
input.short{min-width:0;width:7rem}.last-error{color:var(--bad)}
button,.button{padding:.38rem .8rem;border:1px solid #c5cbd6;border-radius:6px;background:#fff;
font:inherit;cursor:pointer;color:var(--fg)}
button:hover{background:#f0f3f8}
button.primary{background:var(--accent);border-color:var(--accent);color:#fff}
button.danger{border-color:#e3b1ab;color:var(--bad)}button.danger:hover{background:#fdf0ef}
button.small{padding:.15rem .5rem;font-size:.82rem}
.notice{padding:.6rem .9rem;border-radius:6px;margin:0 0 1rem;background:#ddf4e8;color:#0f5132}
.error{padding:.6rem .9rem;border-radius:6px;margin:0 0 1rem;background:#fde7e5;color:#7a1610}
dl.record{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1.2rem;margin:0}
dl.record dt{color:var(--muted)}dl.record dd{margin:0}
.pager{display:flex;gap:1rem;margin:.8rem 0}
.login{max-width:26rem;margin:4rem auto}
.login input{width:100%;margin:.3rem 0 .8rem}
.counts{display:grid;grid-template-columns:repeat(4,minmax(8rem,1fr));gap:.8rem;margin:0 0 1rem}
.counts .card{margin:0}.counts .v{font-size:1.5rem;font-weight:600;font-variant-numeric:tabular-nums}
.op .path{font-weight:600}.op h4{margin:1rem 0 .3rem}
.toc{columns:2;font-size:.9rem}.toc li{break-inside:avoid}
td.schema-type{min-width:8rem}
table.fields,table.params{font-size:.9rem;margin:.3rem 0 .6rem}
td code{word-break:break-word}td:first-child code{word-break:normal;white-space:nowrap}
.response{margin:.4rem 0 .8rem}.response>p{margin:.3rem 0}
ul.variants{margin:.2rem 0;padding-left:1.1rem}
`;

/** A small icon, so that browsers do not ask for /favicon.ico. */
export const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" ' +
  'rx="6" fill="#1d2330"/><text x="16" y="23" font-family="sans-serif" font-size="20" ' +
  'font-weight="700" fill="#dbe6ff" text-anchor="middle">d</text></svg>';
