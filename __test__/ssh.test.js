// SSH drop-ins against a real OpenSSH sshd on 127.0.0.1 (started here, key-only, strict
// host-key checking): runSshCommand's results and failures against upstream's, push and pull
// round trips against GNU tar's `tar -cf - . | tar -xf -`, progress lines, refused host
// keys, unwritable and unreadable remote directories, a server killed mid-transfer, aborts,
// and no child process on the host. Run as an unprivileged user in CI (scripts/test/full.sh).
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/ssh";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runSshCommand, syncDirectoryFromSsh, syncDirectoryToSsh } from "../lib/ssh.js";
import { native } from "../lib/native.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { childrenOf, generateKey, scratchPlaces, startSshd } from "./helpers/sshd.js";
import { gnuTar, removeEscapingSymlinks, treeState } from "./helpers/tar.js";
import { randomExcludes, writeRandomTree } from "./helpers/trees.js";

const seed = runSeed();
let server;
let work;

const places = scratchPlaces(
  () => work,
  () => server.workspace,
);
const scratch = places.local;
const remotePath = places.remote;

/** GNU tar's `tar -C dir --exclude ._* --exclude … -cf - .` extracted into `dest` (upstream's pipeline). */
function gnuCopy(dir, exclude, dest, { preserve = false } = {}) {
  mkdirSync(dest, { recursive: true });
  const args = ["-C", dir, "--exclude", "._*"];
  for (const entry of exclude) args.push("--exclude", entry);
  const archive = gnuTar([...args, "-cf", "-", "."]);
  gnuTar([preserve ? "-xpf" : "-xf", "-", "-C", dest], { input: archive });
}

/** Stage lines as `{ raw, percent, doneMb, totalMb, failed }`. */
function parse(line) {
  const raw = line.trimEnd();
  const percent = raw.match(/: (?:failed at )?(\d+)% \(([\d.]+)\/([\d.]+) MB\)$/);
  if (percent)
    return {
      raw,
      percent: Number(percent[1]),
      doneMb: Number(percent[2]),
      totalMb: Number(percent[3]),
      failed: raw.includes("failed at"),
    };
  const mb = raw.match(/: (?:failed after )?([\d.]+) MB$/);
  return { raw, percent: null, doneMb: mb ? Number(mb[1]) : null, totalMb: null, failed: raw.includes("failed after") };
}

/** Adds relative symlinks that stay inside the tree (a pull round-trips those). */
function addInTreeLinks(root) {
  writeFileSync(path.join(root, "target.txt"), "target\n");
  mkdirSync(path.join(root, "linkdir"), { recursive: true });
  symlinkSync("target.txt", path.join(root, "link-to-file"));
  symlinkSync("../target.txt", path.join(root, "linkdir", "up-link"));
  symlinkSync("linkdir", path.join(root, "link-to-dir"));
  symlinkSync("missing/nowhere", path.join(root, "dangling"));
}

/** Resolves with the pids of new children of this process seen while `work` ran. */
async function newChildrenDuring(work) {
  const before = new Set(childrenOf(process.pid));
  const seen = new Set();
  let running = true;
  const sampler = (async () => {
    while (running) {
      for (const pid of childrenOf(process.pid)) if (!before.has(pid)) seen.add(pid);
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  try {
    await work();
  } finally {
    running = false;
    await sampler;
  }
  return [...seen];
}

/** Staging directories in the temp dir before the suite (other processes', stale ones). */
let foreignStaging = new Set();

/** The staging directories syncDirectoryFromSsh left in the temp dir (none, ever). */
function stagingDirs() {
  return readdirSync(os.tmpdir()).filter(
    (name) => name.startsWith("paperclip-ssh-sync-back-") && !foreignStaging.has(name),
  );
}

beforeAll(async () => {
  // sshd refuses root logins in upstream's fixture, and root ignores the permission traps
  // below: CI runs this suite as an unprivileged user (scripts/test/full.sh).
  if (process.getuid?.() === 0)
    throw new Error("run the SSH suites as an unprivileged user (see scripts/test/full.sh), not as root");
  foreignStaging = new Set(stagingDirs());
  work = mkdtempSync(path.join(os.tmpdir(), "pc-ssh-test-"));
  server = await startSshd(path.join(work, "sshd"));
}, 30_000);

afterAll(async () => {
  await server?.stop();
  if (work) {
    // Undo the permission traps so the scratch tree can go.
    for (const dir of [
      path.join(server?.workspace ?? "", "locked"),
      path.join(server?.workspace ?? "", "unreadable"),
    ]) {
      if (existsSync(dir)) chmodSync(dir, 0o755);
    }
    rmSync(work, { recursive: true, force: true });
  }
});

describe(`runSshCommand (seed ${seed})`, () => {
  it("returns stdout and stderr, forwards stdin and env, as upstream does", async () => {
    const ok = await runSshCommand(server.config, "printf 'out %s' \"$FOO\"; echo err >&2", {
      env: { FOO: 'it\'s "x" $HOME' },
    });
    expect(ok).toEqual({ stdout: 'out it\'s "x" $HOME', stderr: "err\n" });
    const theirs = await upstream.runSshCommand(server.config, "printf 'out %s' \"$FOO\"; echo err >&2", {
      env: { FOO: 'it\'s "x" $HOME' },
    });
    expect(ok).toEqual(theirs);
    const echoed = await runSshCommand(server.config, "cat; pwd", { stdin: "hello over ssh stdin\n" });
    expect(echoed.stdout).toBe(`hello over ssh stdin\n${os.homedir()}\n`);
  });

  it("fails like upstream on a non-zero exit", async () => {
    const ours = await runSshCommand(server.config, "echo partial; echo 'went wrong' >&2; exit 3", { stdin: "" }).catch(
      (e) => e,
    );
    const theirs = await upstream
      .runSshCommand(server.config, "echo partial; echo 'went wrong' >&2; exit 3", { stdin: "" })
      .catch((e) => e);
    expect(ours).toBeInstanceOf(Error);
    expect(ours.message).toBe("went wrong");
    expect(ours.message).toBe(theirs.message);
    for (const key of ["stdout", "stderr", "code", "signal", "killed"]) expect(ours[key]).toEqual(theirs[key]);
    const silent = await runSshCommand(server.config, "exit 7").catch((e) => e);
    expect(silent.message).toBe("Process exited with code 7");
    expect(silent.code).toBe(7);
  });

  it("rejects the environment keys upstream rejects, before connecting", async () => {
    const nowhere = { ...server.config, port: 1 };
    for (const key of ["BAD KEY", "1ABC", "A-B", "", "É", "A=B"]) {
      await expect(runSshCommand(nowhere, "true", { env: { [key]: "v" } })).rejects.toThrow(
        `Invalid SSH environment variable key: ${key}`,
      );
      await expect(upstream.runSshCommand(nowhere, "true", { env: { [key]: "v" } })).rejects.toThrow(
        `Invalid SSH environment variable key: ${key}`,
      );
    }
    // Keys whose value is not a string are dropped, as upstream drops them.
    await expect(runSshCommand(server.config, "echo ok", { env: { "BAD KEY": undefined } })).resolves.toEqual({
      stdout: "ok\n",
      stderr: "",
    });
  });

  it("bounds output (maxBuffer) and time (timeoutMs)", async () => {
    const big = await runSshCommand(server.config, "head -c 5000 /dev/zero", { maxBuffer: 1000 }).catch((e) => e);
    expect(big.code).toBe("ERR_CHILD_PROCESS_STDIO_MAXBUFFER");
    const started = Date.now();
    const slow = await runSshCommand(server.config, "sleep 5", { timeoutMs: 600 }).catch((e) => e);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(slow.killed).toBe(true);
    expect(slow.code).toBe("ERR_PAPERCLIP_NATIVE_SSH_TIMEOUT");
  });

  it("refuses a changed or unknown host key before running anything; checks nothing when not strict", async () => {
    const marker = remotePath("marker");
    const other = generateKey(path.join(scratch("keys"), "other"));
    const changed = { ...server.config, knownHosts: `[127.0.0.1]:${server.port} ${other}\n` };
    const err = await runSshCommand(changed, `touch ${marker}`).catch((e) => e);
    expect(err.code).toBe("ERR_PAPERCLIP_NATIVE_SSH_HOST_KEY_CHANGED");
    expect(err.message).toMatch(/Host key verification failed/);
    const unknown = { ...server.config, knownHosts: `[127.0.0.1]:${server.port + 1} ${server.hostPublicKey}\n` };
    const err2 = await runSshCommand(unknown, `touch ${marker}`).catch((e) => e);
    expect(err2.code).toBe("ERR_PAPERCLIP_NATIVE_SSH_HOST_KEY_UNKNOWN");
    expect(existsSync(marker)).toBe(false);
    const remoteDir = remotePath("never");
    const local = scratch("never-local");
    writeFileSync(path.join(local, "f"), "x");
    const lines = [];
    await expect(
      syncDirectoryToSsh({
        spec: { ...changed, remoteCwd: server.workspace },
        localDir: local,
        remoteDir,
        onProgress: (l) => lines.push(parse(l)),
      }),
    ).rejects.toMatchObject({ code: "ERR_PAPERCLIP_NATIVE_SSH_HOST_KEY_CHANGED" });
    expect(existsSync(remoteDir)).toBe(false);
    expect(lines.at(-1)?.failed).toBe(true);
    const loose = { ...server.config, knownHosts: null, strictHostKeyChecking: false };
    await expect(runSshCommand(loose, "echo loose")).resolves.toEqual({ stdout: "loose\n", stderr: "" });
    const badKey = { ...server.config, privateKey: generateKeyText() };
    await expect(runSshCommand(badKey, "true")).rejects.toMatchObject({ code: "ERR_PAPERCLIP_NATIVE_SSH_AUTH_FAILED" });
  });
});

/** A client key the server does not authorise. */
function generateKeyText() {
  const file = path.join(scratch("stranger"), "key");
  generateKey(file);
  return readFileSync(file, "utf8");
}

describe(`syncDirectoryToSsh / syncDirectoryFromSsh (seed ${seed})`, () => {
  it("pushes generated trees exactly as upstream's tar pipeline does, excludes and symlinks included", async () => {
    const rng = createRandom(seed);
    for (let round = 0; round < 4; round += 1) {
      const local = scratch("push-src");
      await writeRandomTree(rng, local, { special: false });
      addInTreeLinks(local);
      const exclude = randomExcludes(rng);
      const remoteDir = remotePath("push");
      const children = await newChildrenDuring(() =>
        syncDirectoryToSsh({ spec: server.spec, localDir: local, remoteDir, exclude, followSymlinks: false }),
      );
      expect(children, "no child process on the host").toEqual([]);
      const expected = scratch("push-ref");
      gnuCopy(local, exclude, expected);
      expect(treeState(remoteDir), `round ${round}, excludes ${JSON.stringify(exclude)}`).toEqual(treeState(expected));
    }
  });

  it("follows symlinks when asked (tar -h)", async () => {
    const source = scratch("follow-target");
    writeFileSync(path.join(source, "auth.json"), '{"token":"secret"}\n');
    const local = scratch("follow-src");
    symlinkSync(path.join(source, "auth.json"), path.join(local, "auth.json"));
    const remoteDir = remotePath("follow");
    await syncDirectoryToSsh({ spec: server.spec, localDir: local, remoteDir, followSymlinks: true });
    expect(treeState(remoteDir)["auth.json"].kind).toBe("file");
  });

  it("pulls generated trees exactly, replaces the local contents and keeps preserved entries", async () => {
    const rng = createRandom(seed ^ 0x5a5a);
    for (let round = 0; round < 4; round += 1) {
      const remoteDir = remotePath("pull-src");
      await writeRandomTree(rng, remoteDir, { special: false });
      removeEscapingSymlinks(remoteDir);
      addInTreeLinks(remoteDir);
      const exclude = randomExcludes(rng);
      const local = scratch("pull-dst");
      writeFileSync(path.join(local, "stale.txt"), "goes away");
      mkdirSync(path.join(local, ".git"));
      writeFileSync(path.join(local, ".git", "HEAD"), "kept");
      const children = await newChildrenDuring(() =>
        syncDirectoryFromSsh({
          spec: server.spec,
          remoteDir,
          localDir: local,
          exclude: [...exclude, ".git"],
          preserveLocalEntries: [".git"],
        }),
      );
      expect(children, "no child process on the host").toEqual([]);
      const expected = scratch("pull-ref");
      gnuCopy(remoteDir, [...exclude, ".git"], expected, { preserve: true });
      mkdirSync(path.join(expected, ".git"), { recursive: true });
      writeFileSync(path.join(expected, ".git", "HEAD"), "kept");
      const state = treeState(local);
      const want = treeState(expected);
      // The preserved directory is local, not transferred: it is kept as it was.
      expect(readFileSync(path.join(local, ".git", "HEAD"), "utf8")).toBe("kept");
      for (const key of [".git", ".git/HEAD"]) {
        delete state[key];
        delete want[key];
      }
      expect(state, `round ${round}, excludes ${JSON.stringify(exclude)}`).toEqual(want);
    }
    expect(stagingDirs()).toEqual([]);
  });

  it("round-trips the workspace's own links to absolute paths and out of the tree (a virtualenv); a new one from the remote is refused", async () => {
    const local = scratch("links-local");
    mkdirSync(path.join(local, ".venv", "bin"), { recursive: true });
    symlinkSync("/usr/bin/python3", path.join(local, ".venv", "bin", "python3"));
    symlinkSync("../../outside-target", path.join(local, ".venv", "up"));
    writeFileSync(path.join(local, "a.txt"), "a\n");
    const remoteDir = remotePath("links-remote");
    await syncDirectoryToSsh({ spec: server.spec, localDir: local, remoteDir });
    writeFileSync(path.join(remoteDir, "agent.txt"), "agent\n");
    await syncDirectoryFromSsh({ spec: server.spec, remoteDir, localDir: local });
    expect(readlinkSync(path.join(local, ".venv", "bin", "python3"))).toBe("/usr/bin/python3");
    expect(readlinkSync(path.join(local, ".venv", "up"))).toBe("../../outside-target");
    expect(readFileSync(path.join(local, "agent.txt"), "utf8")).toBe("agent\n");
    // A link the remote added (or retargeted) out of the tree: refused, local untouched.
    symlinkSync("/etc/passwd", path.join(remoteDir, "planted"));
    const before = treeState(local);
    const error = await syncDirectoryFromSsh({ spec: server.spec, remoteDir, localDir: local }).catch((e) => e);
    expect(error.code).toBe("ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY");
    expect(treeState(local)).toEqual(before);
    expect(stagingDirs()).toEqual([]);
  });

  it("reports upload progress against upstream's total (the files' sizes): monotonic, under 100% until done, then 100%", async () => {
    const local = scratch("progress-src");
    for (let i = 0; i < 6; i += 1)
      writeFileSync(path.join(local, `blob-${i}.bin`), Buffer.alloc(1024 * 1024 + i, i + 1));
    const lines = [];
    await syncDirectoryToSsh({
      spec: server.spec,
      localDir: local,
      remoteDir: remotePath("progress"),
      onProgress: (l) => lines.push(parse(l)),
      progressLabel: "workspace",
    });
    expect(lines.length).toBeGreaterThan(1);
    for (const line of lines) expect(line.raw).toMatch(/^\[paperclip\] Syncing workspace to ssh: /);
    const done = lines.map((l) => l.doneMb);
    for (let i = 1; i < done.length; i += 1) expect(done[i]).toBeGreaterThanOrEqual(done[i - 1]);
    for (const line of lines.slice(0, -1)) if (line.percent != null) expect(line.percent).toBeLessThanOrEqual(99);
    const last = lines.at(-1);
    const files = Array.from({ length: 6 }, (_, i) => 1024 * 1024 + i).reduce((a, b) => a + b, 0);
    expect(last.percent).toBe(100);
    expect(last.totalMb).toBe(Number((files / 1048576).toFixed(1)));
    expect(last.doneMb).toBe(last.totalMb);
  });

  it("reports restore progress with a terminal line", async () => {
    const remoteDir = remotePath("restore-progress");
    mkdirSync(remoteDir);
    for (let i = 0; i < 4; i += 1)
      writeFileSync(path.join(remoteDir, `blob-${i}.bin`), Buffer.alloc(1024 * 1024, i + 1));
    const lines = [];
    const local = scratch("restore-progress-dst");
    await syncDirectoryFromSsh({
      spec: server.spec,
      remoteDir,
      localDir: local,
      onProgress: (l) => lines.push(parse(l)),
      progressLabel: "workspace",
    });
    for (const line of lines) expect(line.raw).toMatch(/^\[paperclip\] Restoring workspace from ssh: /);
    for (const line of lines.slice(0, -1)) if (line.percent != null) expect(line.percent).toBeLessThanOrEqual(99);
    const last = lines.at(-1);
    expect(last.percent === 100 || (last.percent === null && last.doneMb !== null)).toBe(true);
    expect(treeState(local)).toEqual(treeState(remoteDir));
  });

  it("fails with a code and a `failed at` line when the remote directory is not writable", async () => {
    const locked = path.join(server.workspace, "locked");
    mkdirSync(locked, { recursive: true });
    chmodSync(locked, 0o555);
    const local = scratch("locked-src");
    writeFileSync(path.join(local, "f.bin"), Buffer.alloc(256 * 1024, 1));
    const lines = [];
    const err = await syncDirectoryToSsh({
      spec: server.spec,
      localDir: local,
      remoteDir: path.join(locked, "sub"),
      onProgress: (l) => lines.push(parse(l)),
    }).catch((e) => e);
    expect(err.code).toBe("ERR_PAPERCLIP_NATIVE_SSH_REMOTE_FAILED");
    expect(err.message).toMatch(/Permission denied/);
    expect(lines.at(-1).raw).toMatch(/: failed at \d+% \([\d.]+\/[\d.]+ MB\)$/);
  });

  it("leaves the local directory untouched when the remote directory cannot be read", async () => {
    const unreadable = path.join(server.workspace, "unreadable");
    mkdirSync(unreadable, { recursive: true });
    writeFileSync(path.join(unreadable, "secret"), "x");
    chmodSync(unreadable, 0o000);
    const local = scratch("unreadable-dst");
    writeFileSync(path.join(local, "keep.txt"), "mine");
    const before = treeState(local);
    const missing = await syncDirectoryFromSsh({
      spec: server.spec,
      remoteDir: path.join(server.workspace, "no-such-dir"),
      localDir: local,
    }).catch((e) => e);
    expect(missing.code).toBe("ERR_PAPERCLIP_NATIVE_SSH_REMOTE_FAILED");
    expect(missing.message).toMatch(/can't cd|No such file/);
    const denied = await syncDirectoryFromSsh({ spec: server.spec, remoteDir: unreadable, localDir: local }).catch(
      (e) => e,
    );
    expect(denied.code).toBe("ERR_PAPERCLIP_NATIVE_SSH_REMOTE_FAILED");
    expect(treeState(local)).toEqual(before);
    expect(stagingDirs()).toEqual([]);
    // A local directory that did not exist is not left behind, nor are its new parents.
    const parent = scratch("pull-missing-local");
    await expect(
      syncDirectoryFromSsh({ spec: server.spec, remoteDir: unreadable, localDir: path.join(parent, "x", "y") }),
    ).rejects.toMatchObject({ code: "ERR_PAPERCLIP_NATIVE_SSH_REMOTE_FAILED" });
    expect(readdirSync(parent)).toEqual([]);
  });

  it("fails (never succeeds) when the server dies mid-transfer, with a `failed at` line", async () => {
    const local = scratch("killed-src");
    const big = path.join(local, "big.bin");
    writeFileSync(big, "");
    truncateSync(big, 512 * 1024 * 1024);
    const lines = [];
    let killed = 0;
    const err = await syncDirectoryToSsh({
      spec: server.spec,
      localDir: local,
      remoteDir: remotePath("killed"),
      onProgress: (l) => {
        lines.push(parse(l));
        if (killed === 0) killed = server.killConnections();
      },
    }).catch((e) => e);
    expect(killed).toBeGreaterThan(0);
    expect(err).toBeInstanceOf(Error);
    expect(["ERR_PAPERCLIP_NATIVE_SSH_CONNECTION_LOST", "ERR_PAPERCLIP_NATIVE_SSH_REMOTE_FAILED"]).toContain(err.code);
    const last = lines.at(-1);
    expect(last.raw).toMatch(/: failed at \d+% \([\d.]+\/[\d.]+ MB\)$/);
    expect(last.percent).toBeLessThan(100);

    // The same on a download: the local directory keeps its contents.
    const remoteDir = remotePath("killed-remote");
    mkdirSync(remoteDir);
    writeFileSync(path.join(remoteDir, "big.bin"), "");
    truncateSync(path.join(remoteDir, "big.bin"), 512 * 1024 * 1024);
    const dest = scratch("killed-dst");
    writeFileSync(path.join(dest, "keep.txt"), "mine");
    let killedDown = 0;
    const downErr = await syncDirectoryFromSsh({
      spec: server.spec,
      remoteDir,
      localDir: dest,
      onProgress: () => {
        if (killedDown === 0) killedDown = server.killConnections();
      },
    }).catch((e) => e);
    expect(killedDown).toBeGreaterThan(0);
    expect(downErr).toBeInstanceOf(Error);
    expect(readdirSync(dest)).toEqual(["keep.txt"]);
    expect(stagingDirs()).toEqual([]);
  });

  it("aborts with an AbortError and leaves no local state behind", async () => {
    const local = scratch("abort-src");
    writeFileSync(path.join(local, "big.bin"), "");
    truncateSync(path.join(local, "big.bin"), 512 * 1024 * 1024);
    const controller = new AbortController();
    const started = Date.now();
    const err = await syncDirectoryToSsh({
      spec: server.spec,
      localDir: local,
      remoteDir: remotePath("abort"),
      signal: controller.signal,
      onProgress: () => controller.abort(),
    }).catch((e) => e);
    expect(err.name).toBe("AbortError");
    expect(Date.now() - started).toBeLessThan(10_000);

    const remoteDir = remotePath("abort-remote");
    mkdirSync(remoteDir);
    writeFileSync(path.join(remoteDir, "big.bin"), "");
    truncateSync(path.join(remoteDir, "big.bin"), 512 * 1024 * 1024);
    const dest = scratch("abort-dst");
    writeFileSync(path.join(dest, "keep.txt"), "mine");
    const down = new AbortController();
    const downErr = await syncDirectoryFromSsh({
      spec: server.spec,
      remoteDir,
      localDir: dest,
      signal: down.signal,
      onProgress: () => down.abort(),
    }).catch((e) => e);
    expect(downErr.name).toBe("AbortError");
    expect(readdirSync(dest)).toEqual(["keep.txt"]);
    expect(stagingDirs()).toEqual([]);
    const pre = new AbortController();
    pre.abort();
    await expect(runSshCommand(server.config, "true", { signal: pre.signal })).rejects.toMatchObject({
      name: "AbortError",
    });
  });

  it("runs concurrent transfers on separate sessions", async () => {
    const local = scratch("concurrent-src");
    for (let i = 0; i < 20; i += 1) writeFileSync(path.join(local, `f${i}`), Buffer.alloc(64 * 1024, i));
    const targets = [0, 1, 2, 3].map(() => remotePath("concurrent"));
    await Promise.all(
      targets.map((remoteDir) => syncDirectoryToSsh({ spec: server.spec, localDir: local, remoteDir })),
    );
    for (const remoteDir of targets) expect(treeState(remoteDir)).toEqual(treeState(local));
  });

  it("streams a file each way on the channel code of the git-bundle transfers (internal)", async () => {
    const local = scratch("bundle");
    const source = path.join(local, "workspace.bundle");
    writeFileSync(source, Buffer.alloc(3 * 1024 * 1024 + 17, 7));
    const remoteDir = remotePath("bundle-remote");
    const target = { ...server.config, knownHosts: server.config.knownHosts, privateKey: server.config.privateKey };
    const script = (body) => `sh -c '${body}'`;
    const up = await native.sshUploadFile(
      target,
      script(`mkdir -p ${remoteDir} && cat > ${remoteDir}/in.bundle`),
      source,
    );
    expect(up.bytes).toBe(3 * 1024 * 1024 + 17);
    const back = path.join(local, "back.bundle");
    const down = await native.sshDownloadFile(target, script(`cat ${remoteDir}/in.bundle`), back);
    expect(down.bytes).toBe(up.bytes);
    expect(readFileSync(back).equals(readFileSync(source))).toBe(true);
    // A remote that stops reading early fails the upload; a failed download leaves no file.
    await expect(native.sshUploadFile(target, script("head -c 10 >/dev/null; exit 0"), source)).rejects.toThrow(
      /before the remote command read all of its input|ssh exited/,
    );
    const failed = path.join(local, "failed.bundle");
    await expect(native.sshDownloadFile(target, script("echo partial; echo nope >&2; exit 5"), failed)).rejects.toThrow(
      /nope/,
    );
    expect(existsSync(failed)).toBe(false);
  });
});
