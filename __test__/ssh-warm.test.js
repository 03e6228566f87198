// Warm channels (docs/ssh.md, crates/core/src/ssh/warm.rs): a session the pool keeps starts
// the remote shell of its next command while the current one runs, and runs the next
// `sh -c '<script>'` as that script on it. Against a real sshd, every command gives what a
// channel of its own gives (stdout, stderr, stdin, exit status, signal) and what upstream's
// `runSshCommand` (a host `ssh`) gives; a login that prints something of its own never gets
// a warm channel used. Run as an unprivileged user (scripts/test/full.sh).
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import * as upstream from "@paperclipai/adapter-utils/ssh";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeIdleSshSessions, sshPoolStats } from "../lib/extras.js";
import { runSshCommand } from "../lib/ssh.js";
import { startSshd } from "./helpers/sshd.js";

let work;
const servers = {};

beforeAll(async () => {
  if (process.getuid?.() === 0)
    throw new Error("run the SSH suites as an unprivileged user (see scripts/test/full.sh), not as root");
  work = mkdtempSync(path.join(os.tmpdir(), "pc-ssh-warm-"));
  servers.plain = await startSshd(path.join(work, "plain"));
  // A login that prints before every command (a startup file that echoes).
  servers.noisy = await startSshd(path.join(work, "noisy"), {
    forceCommand: `printf 'welcome\\n'; eval "$SSH_ORIGINAL_COMMAND"`,
  });
  // A login that prints only on stderr.
  servers.warning = await startSshd(path.join(work, "warning"), {
    forceCommand: `printf 'rc: warning\\n' >&2; eval "$SSH_ORIGINAL_COMMAND"`,
  });
}, 30_000);

afterAll(async () => {
  closeIdleSshSessions();
  for (const server of Object.values(servers)) await server.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** The outcome of a call as data: its result, or its rejection's upstream fields. */
async function settle(call) {
  try {
    return { ok: await call() };
  } catch (error) {
    const { message, stdout, stderr, code, signal, killed } = error;
    return { failed: { message, stdout, stderr, code, signal, killed } };
  }
}

const bigInput = Array.from({ length: 20_000 }, (_, i) => `line ${i} ${"é".repeat(i % 7)}\n`).join("");
/** Commands with their options: stdin, stderr, exit codes, a signal, quoting, environment. */
const CASES = [
  ["echo one", {}],
  ["cat", { stdin: "from stdin\nsecond line without newline" }],
  ["sha256sum", { stdin: bigInput }],
  ["echo out; echo err >&2; exit 3", {}],
  [
    "printf '%s|' \"$0\" 'it'\"'\"'s' \"$GREETING\"; cat >/dev/null",
    { env: { GREETING: "hi 'there'\nnext" }, stdin: "x" },
  ],
  ["kill -TERM $$", {}],
  ['read first; echo "got $first"; cat | wc -c', { stdin: `a line\n${"rest".repeat(1000)}` }],
  [`${"echo pad >/dev/null; ".repeat(800)}echo long script`, {}],
  ["true", {}],
];

/** Each case in turn on `server`, with warm channels on or off. */
async function runAll(server, warm) {
  const saved = process.env.PAPERCLIP_NATIVE_SSH_WARM;
  if (warm) delete process.env.PAPERCLIP_NATIVE_SSH_WARM;
  else process.env.PAPERCLIP_NATIVE_SSH_WARM = "0";
  closeIdleSshSessions();
  const before = sshPoolStats();
  try {
    const results = [];
    for (const [command, options] of CASES)
      results.push(await settle(() => runSshCommand(server.config, command, options)));
    const after = sshPoolStats();
    return { results, used: after.warmUsed - before.warmUsed, dropped: after.warmDropped - before.warmDropped };
  } finally {
    if (saved === undefined) delete process.env.PAPERCLIP_NATIVE_SSH_WARM;
    else process.env.PAPERCLIP_NATIVE_SSH_WARM = saved;
    closeIdleSshSessions();
  }
}

describe("warm channels", () => {
  it("run each next command with the results of a channel of its own, and upstream's", async () => {
    const warm = await runAll(servers.plain, true);
    const cold = await runAll(servers.plain, false);
    expect(warm.results).toEqual(cold.results);
    // Every command after the first one of each session; the cases run one after another
    // on one kept session, except after the signal (a failed command keeps it too).
    expect(warm.used).toBeGreaterThanOrEqual(CASES.length - 2);
    expect(warm.dropped).toBe(0);
    expect(cold.used).toBe(0);
    // The shapes the cases are meant to cover.
    expect(warm.results[1].ok.stdout).toBe("from stdin\nsecond line without newline");
    expect(warm.results[2].ok.stdout).toBe(`${createHash("sha256").update(bigInput).digest("hex")}  -\n`);
    expect(warm.results[3].failed).toMatchObject({ code: 3, stdout: "out\n", stderr: "err\n" });
    // Killed by SIGTERM: the signal, or 143 from a login shell that waited for it.
    const killed = warm.results[5].failed;
    expect(killed.signal === "SIGTERM" || killed.code === 143).toBe(true);
    expect(warm.results[6].ok.stdout).toBe("got a line\n4000\n");
    // Upstream's own runSshCommand (a host ssh); not the case that prints `$0`.
    // (Upstream's failure message is `Command failed: ssh …` with its temporary key paths.)
    const fields = ({ ok, failed }) => (ok ? { ok } : { failed: { ...failed, message: undefined } });
    for (const index of [0, 1, 2, 3, 5, 6, 7]) {
      const [command, options] = CASES[index];
      const theirs = await settle(() => upstream.runSshCommand(servers.plain.config, command, options));
      expect(fields(theirs)).toEqual(fields(warm.results[index]));
    }
  }, 120_000);

  it("are dropped unused when the login prints something of its own, on stdout or on stderr", async () => {
    for (const server of [servers.noisy, servers.warning]) {
      const warm = await runAll(server, true);
      const cold = await runAll(server, false);
      expect(warm.results).toEqual(cold.results);
      expect(warm.used).toBe(0);
      expect(warm.dropped).toBeGreaterThan(0);
    }
    const noisy = await runAll(servers.noisy, true);
    expect(noisy.results[0].ok.stdout).toBe("welcome\none\n");
  }, 120_000);
});
