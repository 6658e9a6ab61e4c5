// The WeChat Pay sandbox as a child process of the benchmark (started by startSandboxProcess): it
// verifies and signs with RSA for every query, so it gets a CPU of its own, as WeChat Pay would.
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { startWechatPaySandbox, type WechatPayAccount } from "../../dev/wechatpay-sandbox";

export type SandboxProcess = {
  url: string;
  account: WechatPayAccount;
  close(): Promise<void>;
};

/** Starts this file as a child and resolves with the sandbox's URL and merchant account. */
export function startSandboxProcess(): Promise<SandboxProcess> {
  const child = fork(fileURLToPath(import.meta.url), ["--child"], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const kill = () => child.kill("SIGKILL");
  process.once("exit", kill);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the sandbox process exited (code ${code})`)));
    child.once("message", (message: { url: string; account: WechatPayAccount }) => {
      resolve({
        ...message,
        async close() {
          process.off("exit", kill);
          if (child.exitCode === null && child.signalCode === null) {
            child.kill("SIGTERM");
            const timer = setTimeout(kill, 5000);
            await exited;
            clearTimeout(timer);
          }
        },
      });
    });
  });
}

if (process.argv.includes("--child") && process.send) {
  const sandbox = await startWechatPaySandbox({ mode: "publicKey" });
  const stop = () => void sandbox.close().finally(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("disconnect", stop);
  process.send({ url: sandbox.url, account: sandbox.account });
}
