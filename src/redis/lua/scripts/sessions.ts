// sessionStart, sessionRead, sessionEnd: the dashboard's sessions (src/http/pages/session.ts).
// A session is one string, keyed by a digest of its id (never the cookie's value), holding the id
// of the token it was opened with; Redis expires it.
import { defineScript } from "../script";

/** What a session's value starts with: the token's id follows. */
const TOKEN_TAG = "token:";

export const sessionStart = defineScript<void>({
  name: "sessionStart",
  lua: `
--[[ sessionStart: opens a dashboard session.
  ARGV[4] the session's key part (a digest of its id)   ARGV[5] its token's id
  ARGV[6] how long it lasts, ms
  Cost: SET.
]]
rcall("SET", key.session(ARGV[4]), "${TOKEN_TAG}" .. ARGV[5], "PX", ARGV[6])
return 1
`,
  parse() {},
});

export const sessionRead = defineScript<string | undefined>({
  name: "sessionRead",
  lua: `
--[[ sessionRead: the token id of a dashboard session, or "" when there is none (never opened,
  expired or ended).
  ARGV[4] the session's key part (a digest of its id)
  Cost: GET.
]]
return rcall("GET", key.session(ARGV[4])) or ""
`,
  parse(reply) {
    const text = typeof reply === "string" ? reply : "";
    return text.startsWith(TOKEN_TAG) ? text.slice(TOKEN_TAG.length) : undefined;
  },
});

export const sessionEnd = defineScript<void>({
  name: "sessionEnd",
  lua: `
--[[ sessionEnd: ends a dashboard session (sign-out).
  ARGV[4] the session's key part (a digest of its id)
  Cost: DEL.
]]
rcall("DEL", key.session(ARGV[4]))
return 1
`,
  parse() {},
});
