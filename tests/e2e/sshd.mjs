// A real OpenSSH server for the window's remote-host test, as the Rust tests start it
// (crates/hearth-core/tests/integration/support/sshd.rs): Debian's sshd on 127.0.0.1 on a free port
// with throw-away keys, letting in only the second Unix user scripts/setup.sh creates, so the
// "remote" side has another user, home and cache. A client configuration names it `hearth-e2e-host`
// (and a closed port `hearth-e2e-down`); the app reads it from HEARTH_SSH_CONFIG.
//
// Missing sshd or the user, the test FAILS unless HEARTH_SKIP_REMOTE_TESTS=1 (then `null`).
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export const REMOTE_USER = "hearth-remote";
export const HOST = "hearth-e2e-host";
export const HOST_DOWN = "hearth-e2e-down";
const START_WAIT_MS = 10_000;

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const listening = (port) =>
  new Promise((resolve) => {
    const c = net.connect(port, "127.0.0.1", () => (c.destroy(), resolve(true)));
    c.once("error", () => resolve(false));
  });

function remoteHome() {
  try {
    return execFileSync("getent", ["passwd", REMOTE_USER], { encoding: "utf8" }).trim().split(":")[5] || null;
  } catch {
    return null;
  }
}

/** Processes running as the remote user now (`ps -u`). */
export function remoteProcesses() {
  try {
    return execFileSync("ps", ["-u", REMOTE_USER, "-o", "pid=,args="], { encoding: "utf8" }).split("\n").map((l) => l.trim()).filter(Boolean);
  } catch {
    return []; // ps exits 1 when the user runs nothing
  }
}

export async function startSshd() {
  const home = remoteHome();
  const missing = !existsSync("/usr/sbin/sshd") ? "/usr/sbin/sshd is missing (scripts/setup.sh installs openssh-server)" : !home ? `the user ${REMOTE_USER} is missing (scripts/setup.sh creates it)` : null;
  if (missing) {
    if (process.env.HEARTH_SKIP_REMOTE_TESTS === "1") return null;
    throw new Error(`the remote-host test needs a real sshd: ${missing}; set HEARTH_SKIP_REMOTE_TESTS=1 to skip it`);
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), "hearth-e2e-sshd-"));
  chmodSync(dir, 0o755); // sshd reads the authorized keys as the remote user
  const keygen = (name) => {
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "hearth-e2e", "-f", path.join(dir, name)]);
    return readFileSync(path.join(dir, `${name}.pub`), "utf8");
  };
  const hostKey = keygen("host_key");
  writeFileSync(path.join(dir, "authorized_keys"), keygen("user_key"), { mode: 0o644 });
  const [port, closed] = [await freePort(), await freePort()];
  writeFileSync(
    path.join(dir, "sshd_config"),
    [`Port ${port}`, "ListenAddress 127.0.0.1", `HostKey ${dir}/host_key`, `PidFile ${dir}/sshd.pid`, `AuthorizedKeysFile ${dir}/authorized_keys`, "StrictModes no",
      "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "PubkeyAuthentication yes", `AllowUsers ${REMOTE_USER}`,
      "AllowTcpForwarding yes", "X11Forwarding no", "PrintMotd no", "LogLevel ERROR", ""].join("\n"),
  );
  mkdirSync("/run/sshd", { recursive: true });
  writeFileSync(path.join(dir, "known_hosts"), `[127.0.0.1]:${port} ${hostKey}`);
  const entry = (alias, p) =>
    `Host ${alias}\n  HostName 127.0.0.1\n  Port ${p}\n  User ${REMOTE_USER}\n  IdentityFile ${dir}/user_key\n  IdentitiesOnly yes\n  UserKnownHostsFile ${dir}/known_hosts\n  GlobalKnownHostsFile /dev/null\n  IdentityAgent none\n`;
  const clientConfig = path.join(dir, "ssh_config");
  writeFileSync(clientConfig, entry(HOST, port) + entry(HOST_DOWN, closed));
  const child = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", path.join(dir, "sshd_config")], { stdio: ["ignore", "ignore", "inherit"] });
  const deadline = Date.now() + START_WAIT_MS;
  while (!(await listening(port))) {
    if (Date.now() > deadline) throw new Error(`sshd did not listen on ${port} within ${START_WAIT_MS} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    clientConfig,
    home,
    /** A fresh folder in the remote user's home holding `files`, owned by that user; its path. */
    remoteProject(name, files) {
      const parent = path.join(home, "hearth-e2e-projects");
      const root = path.join(parent, `${name}-${Date.now().toString(36)}`);
      mkdirSync(root, { recursive: true });
      for (const [file, text] of Object.entries(files)) writeFileSync(path.join(root, file), text);
      execFileSync("chown", ["-R", `${REMOTE_USER}:${REMOTE_USER}`, parent]);
      return root;
    },
    stop() {
      child.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
