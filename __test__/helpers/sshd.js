// A real OpenSSH sshd on 127.0.0.1 for the SSH suites: generated ed25519 host and client
// keys (ssh-keygen), key-only login for the current user, started and stopped by the test.
// It never skips: a missing sshd or a failed start throws, so a suite that cannot reach a
// server fails instead of passing vacuously. sshd refuses root logins in upstream's fixture
// and in CI the suites run as an unprivileged user (scripts/test/full.sh); here a root run is
// allowed too (`PermitRootLogin prohibit-password`) so a developer can run them directly.
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  writeFileSync,
} from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

const SSHD_CANDIDATES = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/usr/bin/sshd"];

/** A free loopback port (bound, then released). */
async function freePort() {
  return await new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once something on `host`:`port` sends an SSH banner. */
async function waitForBanner(host, port, child, logPath, timeoutMs = 10_000) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null) {
      throw new Error(`sshd exited with ${child.exitCode}: ${readFileSync(logPath, "utf8")}`);
    }
    const ok = await new Promise((resolve) => {
      const socket = net.connect(port, host);
      socket.setTimeout(1000);
      socket.once("data", (d) => {
        socket.destroy();
        resolve(String(d).startsWith("SSH-"));
      });
      socket.once("error", () => resolve(false));
      socket.once("timeout", () => {
        socket.destroy();
        resolve(false);
      });
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `sshd did not answer on ${host} port ${port}: ${existsSync(logPath) ? readFileSync(logPath, "utf8") : ""}`,
  );
}

/** Generates an ed25519 key pair at `file`; returns the public key line. */
export function generateKey(file) {
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", file]);
  return readFileSync(`${file}.pub`, "utf8").trim();
}

/**
 * Starts sshd under `root` (a fresh directory). Returns the connection config for the
 * current user (`SshConnectionConfig` shape, strict host-key checking with the right key),
 * the remote workspace directory, the sshd pid and `stop()` / `killConnections()`.
 * `logLevel` (default `VERBOSE`: one line per accepted login) may be `DEBUG1`, which also
 * logs every channel open and every command (bench/links.mjs counts them). `forceCommand`:
 * sshd's `ForceCommand` (run by the login shell in place of each command, which it finds in
 * `$SSH_ORIGINAL_COMMAND`), to stand for a login that prints or is slow. As root, `user`
 * logs in instead of the current user (it owns the workspace), `listenAddress` is where
 * sshd listens (default 127.0.0.1, port 22 elsewhere) and `prefix` runs it (`["ip", "netns",
 * "exec", ns]`: in a network namespace, helpers/netns.js).
 */
export async function startSshd(
  root,
  {
    logLevel = "VERBOSE",
    forceCommand = null,
    user = os.userInfo().username,
    listenAddress = "127.0.0.1",
    prefix = [],
  } = {},
) {
  const sshd = SSHD_CANDIDATES.find((candidate) => existsSync(candidate));
  if (!sshd) throw new Error("sshd is not installed (apt-get install openssh-server)");
  mkdirSync(root, { recursive: true });
  const port = listenAddress === "127.0.0.1" ? await freePort() : 22;
  const hostKey = path.join(root, "host_key");
  const clientKey = path.join(root, "client_key");
  const hostPublicKey = generateKey(hostKey);
  const clientPublicKey = generateKey(clientKey);
  writeFileSync(path.join(root, "authorized_keys"), `${clientPublicKey}\n`, { mode: 0o600 });
  // Another user's: sshd reads the keys and the user writes the workspace as that user.
  const owner =
    user === os.userInfo().username
      ? null
      : ["-u", "-g"].map((flag) => Number(execFileSync("id", [flag, user], { encoding: "utf8" }).trim()));
  if (owner) chownSync(path.join(root, "authorized_keys"), ...owner);
  const logPath = path.join(root, "sshd.log");
  const configPath = path.join(root, "sshd_config");
  writeFileSync(
    configPath,
    [
      `Port ${port}`,
      `ListenAddress ${listenAddress}`,
      `HostKey ${hostKey}`,
      `PidFile ${path.join(root, "sshd.pid")}`,
      `AuthorizedKeysFile ${path.join(root, "authorized_keys")}`,
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "PubkeyAuthentication yes",
      "PermitRootLogin prohibit-password",
      "UsePAM no",
      "StrictModes no",
      `AllowUsers ${user}`,
      "MaxStartups 64",
      "MaxSessions 64",
      `LogLevel ${logLevel}`,
      "PrintMotd no",
      "UseDNS no",
      ...(forceCommand ? [`ForceCommand ${forceCommand}`] : []),
      "",
    ].join("\n"),
    { mode: 0o600 },
  );
  const command = [...prefix, sshd, "-D", "-e", "-f", configPath, "-E", logPath];
  const child = spawn(command[0], command.slice(1), { stdio: "ignore" });
  await waitForBanner(listenAddress, port, child, logPath);
  const workspace = path.join(root, "workspace");
  mkdirSync(workspace, { recursive: true });
  if (owner) chownSync(workspace, ...owner);
  const config = {
    host: listenAddress,
    port,
    username: user,
    remoteWorkspacePath: workspace,
    privateKey: readFileSync(clientKey, "utf8"),
    knownHosts: `${port === 22 ? listenAddress : `[${listenAddress}]:${port}`} ${hostPublicKey}\n`,
    strictHostKeyChecking: true,
  };
  return {
    config,
    spec: { ...config, remoteCwd: workspace },
    workspace,
    port,
    pid: child.pid,
    hostPublicKey,
    logPath,
    /** The per-connection sshd processes (children of the listener), by pid. */
    connectionPids: () => childrenOf(child.pid),
    /** Kills every connection's sshd (the server side of every session) with SIGKILL. */
    killConnections() {
      const pids = descendantsOf(child.pid);
      for (const pid of pids) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          /* gone */
        }
      }
      return pids.length;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** Pids whose parent is `pid` (from /proc). */
export function childrenOf(pid) {
  const out = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Every descendant of `pid`, children first. */
export function descendantsOf(pid) {
  const out = [];
  const queue = [pid];
  while (queue.length > 0) {
    const next = childrenOf(queue.shift());
    out.push(...next);
    queue.push(...next);
  }
  return out;
}

/**
 * Numbered scratch places of a suite that starts its own sshd: `local(name)` creates a
 * directory under `root()`, `remote(name)` names one (not created) under the server's
 * workspace `workspace()`. The getters are read at call time (both are set in `beforeAll`).
 */
export function scratchPlaces(root, workspace) {
  let counter = 0;
  return {
    local(name) {
      const dir = path.join(root(), `${name}-${(counter += 1)}`);
      mkdirSync(dir, { recursive: true });
      return dir;
    },
    remote(name) {
      return path.join(workspace(), `${name}-${(counter += 1)}`);
    },
  };
}

/**
 * Every entry below `root` but the top-level names in `skip` (default the runtime's own
 * `.paperclip-runtime`): kind, mode, content digest, link target and mtime (whole seconds),
 * as the SSH suites compare a remote tree with upstream's.
 */
export function remoteState(root, skip = [".paperclip-runtime"]) {
  const out = {};
  const walk = (rel) => {
    for (const name of readdirSync(rel ? path.join(root, rel) : root).sort()) {
      if (!rel && skip.includes(name)) continue;
      const key = rel ? `${rel}/${name}` : name;
      const full = path.join(root, key);
      const st = lstatSync(full);
      const mtime = Math.floor(st.mtimeMs / 1000);
      if (st.isSymbolicLink()) out[key] = `link ${readlinkSync(full)}`;
      else if (st.isDirectory()) {
        out[key] = `dir ${(st.mode & 0o7777).toString(8)} ${mtime}`;
        walk(key);
      } else if (st.isFile())
        out[key] =
          `file ${(st.mode & 0o7777).toString(8)} ${mtime} ${createHash("sha256").update(readFileSync(full)).digest("hex")}`;
      else out[key] = `other ${st.mode.toString(8)}`;
    }
  };
  walk("");
  return out;
}
