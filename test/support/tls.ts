// Test certificates made with openssl: a CA of its own, and a server certificate it signed for
// localhost and 127.0.0.1, in a temporary folder the caller removes.
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export type TestCerts = {
  dir: string;
  /** Paths of the CA's certificate, the server's certificate and its key (PEM). */
  ca: string;
  cert: string;
  key: string;
};

export function makeTestCerts(): TestCerts {
  const dir = mkdtempSync(join(tmpdir(), "delayq-tls-"));
  const openssl = (...args: string[]) =>
    execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
  const key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl(
    "req",
    "-x509",
    ...key,
    "-keyout",
    "ca.key",
    "-out",
    "ca.crt",
    "-days",
    "1",
    "-subj",
    "/CN=delayq test CA",
  );
  openssl("req", ...key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost");
  writeFileSync(join(dir, "san.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
  openssl(
    "x509",
    "-req",
    "-in",
    "server.csr",
    "-CA",
    "ca.crt",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-days",
    "1",
    "-out",
    "server.crt",
    "-extfile",
    "san.cnf",
  );
  return {
    dir,
    ca: join(dir, "ca.crt"),
    cert: join(dir, "server.crt"),
    key: join(dir, "server.key"),
  };
}
