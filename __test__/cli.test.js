// CLI tests: the built paperclip-sync binary on generated trees — output, exit codes,
// --json schemas, bad arguments and missing directories.
import { execFileSync, spawnSync } from "node:child_process";
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import * as upstream from "@paperclipai/adapter-utils/workspace-restore-merge";
import * as upstreamExecute from "@paperclipai/adapter-utils/acpx-engine/execute";
import * as upstreamSandbox from "@paperclipai/adapter-utils/sandbox-managed-runtime";
import { listMembers, RawArchive } from "./helpers/tar.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const bin = path.join(repo, "bin", "paperclip-sync.mjs");
const work = mkdtempSync(path.join(os.tmpdir(), "pc-native-cli-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function cli(...args) {
  const out = spawnSync(process.execPath, [bin, ...args], { encoding: "utf8", cwd: work });
  return { code: out.status, stdout: out.stdout, stderr: out.stderr };
}

function cliWithInput(input, ...args) {
  const out = spawnSync(process.execPath, [bin, ...args], { input, cwd: work });
  return { code: out.status, stdout: out.stdout, stderr: out.stderr.toString() };
}

function makeTree(name) {
  const root = path.join(work, name);
  mkdirSync(path.join(root, "src", "deep"), { recursive: true });
  mkdirSync(path.join(root, "node_modules", "pkg"), { recursive: true });
  writeFileSync(path.join(root, "src", "a.ts"), "export const a = 1;\n");
  writeFileSync(path.join(root, "src", "deep", "b.ts"), "export const b = 2;\n");
  writeFileSync(path.join(root, "node_modules", "pkg", "index.js"), "module.exports = 1;\n");
  symlinkSync("src/a.ts", path.join(root, "link"));
  return root;
}

describe("paperclip-sync", () => {
  it("prints help with exit 0 and usage errors with exit 2 and one line", () => {
    const help = cli("--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Commands:");
    for (const command of ["snapshot", "diff", "signature", "demo"]) {
      const sub = cli(command, "--help");
      expect(sub.code, command).toBe(0);
      expect(sub.stdout, command).toMatch(new RegExp(`^Usage: paperclip-sync ${command}`));
    }
    expect(cli().code).toBe(2);
    const unknown = cli("frobnicate");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^paperclip-sync: unknown command 'frobnicate'\n/);
    const badOption = cli("snapshot", work, "--nope");
    expect(badOption.code).toBe(2);
    expect(badOption.stderr).toMatch(/unknown option --nope/);
    expect(cli("snapshot", work, "--exclude").code).toBe(2);
    expect(cli("demo", "--files", "zero").code).toBe(2);
  });

  it("snapshot --json reports the tree with upstream's digest and --out writes a parseable snapshot", async () => {
    const root = makeTree("snap");
    const outFile = path.join(work, "snap.json");
    const run = cli("snapshot", root, "--exclude", "node_modules", "--json", "--out", outFile);
    expect(run.code, run.stderr).toBe(0);
    const summary = JSON.parse(run.stdout);
    expect(Object.keys(summary).sort()).toEqual(
      ["bytes", "digest", "dir", "dirs", "entries", "files", "ms", "out", "symlinks"].sort(),
    );
    expect(summary).toMatchObject({ dir: root, entries: 5, files: 2, dirs: 2, symlinks: 1, bytes: 40, out: outFile });
    const theirs = await upstream.captureDirectorySnapshot(root, { exclude: ["node_modules"] });
    expect(summary.digest).toBe(upstream.directorySnapshotSha256(theirs));
    const parsed = upstream.parseDirectorySnapshot(JSON.parse(readFileSync(outFile, "utf8")));
    expect(parsed && upstream.directorySnapshotSha256(parsed)).toBe(summary.digest);
    const human = cli("snapshot", root);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/entries\s+8\n/);
    expect(human.stdout).toMatch(/digest \(sha256\)\s+[0-9a-f]{64}/);
  });

  it("diff lists added, removed and modified paths as a table and as JSON", () => {
    const root = makeTree("diff");
    const a = path.join(work, "a.json");
    const b = path.join(work, "b.json");
    expect(cli("snapshot", root, "--out", a).code).toBe(0);
    appendFileSync(path.join(root, "src", "a.ts"), "// more\n");
    chmodSync(path.join(root, "src", "deep", "b.ts"), 0o755);
    rmSync(path.join(root, "link"));
    writeFileSync(path.join(root, "new.txt"), "new");
    expect(cli("snapshot", root, "--out", b).code).toBe(0);
    const json = cli("diff", a, b, "--json");
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout).changes).toEqual([
      { change: "removed", path: "link", detail: "symlink" },
      { change: "added", path: "new.txt", detail: "file" },
      { change: "modified", path: "src/a.ts", detail: "content" },
      { change: "modified", path: "src/deep/b.ts", detail: "mode 100644 -> 100755" },
    ]);
    const table = cli("diff", a, b);
    expect(table.stdout).toMatch(/^change\s+path\s+detail/);
    expect(table.stdout).toContain("1 added, 1 removed, 2 modified, 0 retyped");
    expect(cli("diff", a, a).stdout.trim()).toBe("no changes");
  });

  it("signature equals upstream's content signature", async () => {
    const root = makeTree("sig");
    const plain = cli("signature", root);
    expect(plain.code).toBe(0);
    expect(plain.stdout.trim()).toBe(await upstreamExecute.referencedSourceContentSignature(root, { kind: "other" }));
    const ignored = cli("signature", root, "--ignored", "src/deep", "--json");
    expect(JSON.parse(ignored.stdout).signature).toBe(
      await upstreamExecute.referencedSourceContentSignature(root, { kind: "git", ignoredPaths: ["src/deep"] }),
    );
  });

  it("fails with one coded line and exit 1 on a missing directory or a bad snapshot file", () => {
    const missing = cli("snapshot", path.join(work, "does-not-exist"));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^paperclip-sync: ENOENT: no such directory: .*does-not-exist\n$/);
    const junk = path.join(work, "junk.json");
    writeFileSync(junk, JSON.stringify({ version: 1, exclude: [], entries: [["../escape", { kind: "dir" }]] }));
    const bad = cli("diff", junk, junk);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /^paperclip-sync: ERR_PAPERCLIP_NATIVE_INVALID_ARGUMENT: .* is not a valid serialized snapshot\n$/,
    );
    expect(bad.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it("ignored lists a Git project's ignored paths like upstream, notes non-Git dirs and fails closed", async () => {
    const repoDir = path.join(work, "repo");
    mkdirSync(path.join(repoDir, "build"), { recursive: true });
    writeFileSync(path.join(repoDir, ".gitignore"), "build/\nsecret.env\n");
    writeFileSync(path.join(repoDir, "secret.env"), "x");
    writeFileSync(path.join(repoDir, "build", "out.js"), "x");
    writeFileSync(path.join(repoDir, "kept.ts"), "x");
    execFileSync("git", ["init", "-q", repoDir]);
    const run = cli("ignored", repoDir);
    expect(run.code, run.stderr).toBe(0);
    const expected = await upstreamSandbox.resolveReferencedSourceIgnore(repoDir);
    expect(run.stdout).toBe(expected.ignoredPaths.map((p) => `${p}\n`).join(""));
    expect(run.stdout).toBe("build\nsecret.env\n");
    expect(cli("ignored", repoDir, "-z").stdout).toBe("build\0secret.env\0");
    const json = JSON.parse(cli("ignored", repoDir, "--json").stdout);
    expect(json).toMatchObject({ kind: "git", ignoredPaths: ["build", "secret.env"] });
    const plain = path.join(work, "not-a-repo");
    mkdirSync(plain, { recursive: true });
    const other = cli("ignored", plain);
    expect(other.code).toBe(0);
    expect(other.stdout).toBe("");
    expect(other.stderr).toMatch(/not in a Git work tree \(kind: other\)/);
    writeFileSync(path.join(repoDir, ".git", "index"), "corrupt");
    const failed = cli("ignored", repoDir);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toBe("paperclip-sync: git-ignore-scan-failed\n");
  });

  it("pack writes the members upstream's tar would, with progress lines, to a file or stdout", async () => {
    const root = makeTree("pack");
    writeFileSync(path.join(root, "._apple"), "x");
    const out = path.join(work, "pack.tar");
    const run = cli("pack", root, "--out", out, "--exclude", "node_modules", "--json");
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stderr.trim().split("\n");
    expect(lines.at(-2)).toMatch(/^\[paperclip\] Syncing workspace to environment: 100% \(\d+\.\d\/\d+\.\d MB\)$/);
    expect(JSON.parse(lines.at(-1))).toMatchObject({ out, gzip: null, entries: 5 });
    const theirs = path.join(work, "pack-upstream.tar");
    await upstreamSandbox.createTarballFromDirectory({
      localDir: root,
      archivePath: theirs,
      exclude: ["node_modules"],
    });
    expect(listMembers(out)).toEqual(listMembers(theirs));
    const gz = cli("pack", root, "--out", path.join(work, "pack.tgz"), "--gzip=1");
    expect(gz.code).toBe(0);
    expect(execFileSync("tar", ["-tzf", path.join(work, "pack.tgz")], { encoding: "utf8" })).toContain("src/deep/b.ts");
    const piped = spawnSync(process.execPath, [bin, "pack", root, "--out", "-"], { cwd: work });
    expect(piped.status).toBe(0);
    expect(execFileSync("tar", ["-t"], { input: piped.stdout, encoding: "utf8" })).toContain(
      "node_modules/pkg/index.js",
    );
    expect(cli("pack", root).code).toBe(2);
    expect(cli("pack", root, "--out", out, "--gzip=12").code).toBe(2);
  });

  it("extract restores an archive and refuses a hostile one with a coded line, writing nothing outside", () => {
    const root = makeTree("extract-src");
    const archive = path.join(work, "extract.tar");
    expect(cli("pack", root, "--out", archive).code).toBe(0);
    const dest = path.join(work, "extract-dest");
    const run = cli("extract", archive, dest, "--json");
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(path.join(dest, "src", "deep", "b.ts"), "utf8")).toBe("export const b = 2;\n");
    const hostile = new RawArchive().file("ok.txt", "fine").file("../escaped.txt", "pwned").finish();
    const victim = path.join(work, "hostile-dest");
    const refused = cliWithInput(hostile, "extract", "-", victim);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^(\[paperclip\].*\n)*paperclip-sync: ERR_PAPERCLIP_NATIVE_UNSAFE_ARCHIVE_ENTRY: .*\n$/,
    );
    expect(existsSync(path.join(work, "escaped.txt"))).toBe(false);
    const truncated = cliWithInput(
      new RawArchive().file("a.txt", "x".repeat(5000)).finish().subarray(0, 1024),
      "extract",
      "-",
      path.join(work, "trunc-dest"),
    );
    expect(truncated.code).toBe(1);
    expect(truncated.stderr).toMatch(/paperclip-sync: ERR_PAPERCLIP_NATIVE_BAD_ARCHIVE: /);
    expect(cli("extract", path.join(work, "missing.tar"), dest).code).toBe(1);
    expect(cli("extract", archive).code).toBe(2);
  });

  it("merge applies a remote result against a baseline like upstream, and reject refuses conflicts", async () => {
    const host = makeTree("merge-host");
    const baselineFile = path.join(work, "merge-baseline.json");
    expect(cli("snapshot", host, "--exclude", "node_modules", "--out", baselineFile).code).toBe(0);
    const remote = path.join(work, "merge-remote");
    execFileSync("cp", ["-a", host, remote]);
    rmSync(path.join(remote, "node_modules"), { recursive: true });
    writeFileSync(path.join(remote, "src", "a.ts"), "export const a = 'remote';\n");
    rmSync(path.join(remote, "src", "deep", "b.ts"));
    writeFileSync(path.join(remote, "added.ts"), "new\n");
    const twin = path.join(work, "merge-host-upstream");
    execFileSync("cp", ["-a", host, twin]);
    const run = cli("merge", "--baseline", baselineFile, "--source", remote, "--target", host, "--json");
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout).changes).toEqual([
      { change: "added", path: "added.ts", detail: "file" },
      { change: "modified", path: "src/a.ts", detail: "content" },
      { change: "removed", path: "src/deep/b.ts", detail: "file" },
    ]);
    const baseline = upstream.parseDirectorySnapshot(JSON.parse(readFileSync(baselineFile, "utf8")));
    await upstream.mergeDirectoryWithBaseline({ baseline, sourceDir: remote, targetDir: twin });
    const digest = async (dir) => upstream.directorySnapshotSha256(await upstream.captureDirectorySnapshot(dir));
    expect(await digest(host)).toBe(await digest(twin));
    expect(readFileSync(path.join(host, "node_modules", "pkg", "index.js"), "utf8")).toBe("module.exports = 1;\n");
    // Both sides change the same file: reject refuses and changes nothing.
    const second = path.join(work, "merge-baseline-2.json");
    expect(cli("snapshot", host, "--exclude", "node_modules", "--out", second).code).toBe(0);
    writeFileSync(path.join(host, "added.ts"), "host edit\n");
    writeFileSync(path.join(remote, "added.ts"), "remote edit\n");
    const refused = cli(
      "merge",
      "--baseline",
      second,
      "--source",
      remote,
      "--target",
      host,
      "--conflict-policy",
      "reject",
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^paperclip-sync: DIRECTORY_MERGE_CONFLICT: .*added\.ts\n$/);
    expect(readFileSync(path.join(host, "added.ts"), "utf8")).toBe("host edit\n");
    expect(cli("merge", "--baseline", second, "--source", remote).code).toBe(2);
    expect(
      cli("merge", "--baseline", second, "--source", remote, "--target", host, "--conflict-policy", "maybe").code,
    ).toBe(2);
  });

  it("doctor reports what the activation serves, and exit code 1 when it would stay off", () => {
    const doctor = (env = {}) =>
      spawnSync(process.execPath, [bin, "doctor", "--json"], {
        encoding: "utf8",
        cwd: path.dirname(path.dirname(bin)),
        env: { ...process.env, NODE_OPTIONS: "", ...env },
      });
    const on = doctor();
    expect(on.status, on.stderr).toBe(0);
    const report = JSON.parse(on.stdout);
    expect(report.nativeBinary).toBe("loads");
    expect(report.upstream).toMatchObject({ version: "2026.916.1", verified: true });
    expect(report.covered.map((c) => c.module)).toEqual(expect.arrayContaining(["ssh", "remote-managed-runtime"]));
    expect(report.withRegister).toMatchObject({ active: true });
    expect(report.withRegister.modules.ssh).toBeGreaterThan(0);
    expect(report.thisProcess.active).toBe(false);
    const off = doctor({ PAPERCLIP_ADAPTER_UTILS_NATIVE: "0" });
    expect(off.status).toBe(1);
    expect(JSON.parse(off.stdout)).toMatchObject({ turnedOff: true, withRegister: { active: false } });
  }, 60_000);

  it("demo runs the cycle on a generated workspace and every native step matches upstream", () => {
    // The execution-target steps: __test__/demo.test.js.
    const run = cli("demo", "--files", "60", "--json", "--no-ssh", "--no-sandbox");
    expect(run.code, run.stderr).toBe(0);
    const { steps } = JSON.parse(run.stdout);
    const names = steps.map((s) => s.step);
    expect(names).toEqual(
      expect.arrayContaining([
        "resolve ignored paths",
        "baseline snapshot",
        "content signature",
        "pack workspace (tar)",
        "snapshot remote result",
        "incremental host re-snapshot",
        "merge remote result back",
      ]),
    );
    const compared = steps.filter((s) => s["same result"] !== "-");
    expect(compared.length).toBeGreaterThanOrEqual(7);
    expect(compared.every((s) => s["same result"] === "yes")).toBe(true);
    // The workspace is captured after the racy-timestamp window: the re-snapshot reuses hashes.
    const incremental = steps.find((s) => s.step === "incremental host re-snapshot");
    expect(incremental.note).toMatch(/^[1-9]\d* hashes reused$/);
  }, 180_000);
});
