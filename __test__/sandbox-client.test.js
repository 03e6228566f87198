// The command-managed client against upstream's on the same runner: a spawn runner that
// really runs the scripts (`sh`, `base64`, `dd`, `tar`) on this host, in each transport
// mode (single stream, chunked, duplex channel, native syncIn/syncOut). Seeded trees;
// the seed is printed on failure (rerun with DIFF_SEED=<seed>).
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync, writeFileSync, chmodSync, mkdirSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import * as upstream from "@paperclipai/adapter-utils/command-managed-runtime";
import { createCommandManagedRuntimeClient, assertPostUploadCommandsConfined } from "../lib/command-managed-runtime.js";
import { assertSyncOperationsConfined } from "../lib/sandbox-managed-runtime.js";
import * as upstreamSandbox from "@paperclipai/adapter-utils/sandbox-managed-runtime";
import { packDirectoryToFile } from "../lib/tar-stream.js";
import { createRandom, runSeed } from "./helpers/random.js";
import { treeState } from "./helpers/tar.js";
import { writeRandomTree } from "./helpers/trees.js";
import { spawnRunner } from "./helpers/sandbox-runner.js";

const seed = runSeed();
const scratch = mkdtempSync(path.join(os.tmpdir(), "pc-sandbox-client-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let counter = 0;
const freshDir = (label) => {
  const dir = path.join(scratch, `${label}-${(counter += 1)}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

/** Runs `fn`; on failure the message names the seed. */
async function seeded(fn) {
  try {
    await fn(createRandom(seed));
  } catch (error) {
    error.message = `[DIFF_SEED=${seed}] ${error.message}`;
    throw error;
  }
}

/** The call scripts with every random staging suffix and the two remote roots made equal. */
function shape(calls, root) {
  return calls.map((call) => ({
    ...call,
    script: call.script
      .split(root)
      .join("<root>")
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>"),
  }));
}

/** A tree with files straddling the 3 MiB slices, modes, symlinks, unicode, an excluded dir. */
async function writeWorkspace(rng, root) {
  await writeRandomTree(rng, root, { maxDepth: 3, maxEntries: 7, maxFileBytes: 32 * 1024, special: false });
  const big = Buffer.alloc(3 * 1024 * 1024 + 1 + rng.int(4096));
  for (let i = 0; i < big.length; i += 997) big[i] = rng.int(256);
  writeFileSync(path.join(root, "big-ünïcode.bin"), big);
  // The random tree may hold a `node_modules` of its own (a file, a link): the excluded
  // directory replaces it.
  rmSync(path.join(root, "node_modules"), { recursive: true, force: true });
  mkdirSync(path.join(root, "node_modules", "dep"), { recursive: true });
  writeFileSync(path.join(root, "node_modules", "dep", "index.js"), "ignored");
}

const sha = (buffer) => createHash("sha256").update(buffer).digest("hex");

describe("createCommandManagedRuntimeClient against upstream's", () => {
  for (const mode of ["chunked", "single-stream"]) {
    it(`writes and reads a file with the same command lines and progress (${mode})`, () =>
      seeded(async (rng) => {
        const payload = Buffer.alloc(3 * 1024 * 1024 * 2 + rng.int(1024 * 1024));
        for (let i = 0; i < payload.length; i += 1) payload[i] = (i * 31 + 7) & 0xff;
        const results = {};
        for (const [name, create] of [
          ["ours", createCommandManagedRuntimeClient],
          ["upstream", upstream.createCommandManagedRuntimeClient],
        ]) {
          const root = freshDir(name);
          const { runner, calls } = spawnRunner({ singleStream: mode === "single-stream" });
          const client = create({ runner, commandCwd: "/", timeoutMs: 30_000 });
          const progress = [];
          await client.writeFile(path.join(root, "d", "payload.bin"), payload, {
            onProgress: (done, total) => {
              progress.push([done, total]);
            },
          });
          const readProgress = [];
          const back = await client.readFile(path.join(root, "d", "payload.bin"), {
            onProgress: (done, total) => {
              readProgress.push([done, total]);
            },
          });
          results[name] = { calls: shape(calls, root), progress, readProgress, sha: sha(back), tree: treeState(root) };
        }
        expect(results.ours.sha).toBe(sha(payload));
        expect(results.ours.calls).toEqual(results.upstream.calls);
        expect(results.ours.progress).toEqual(results.upstream.progress);
        expect(results.ours.readProgress).toEqual(results.upstream.readProgress);
        expect({ ...results.ours.tree, "d/payload.bin": { ...results.ours.tree["d/payload.bin"], mtime: 0 } }).toEqual({
          ...results.upstream.tree,
          "d/payload.bin": { ...results.upstream.tree["d/payload.bin"], mtime: 0 },
        });
      }));
  }

  for (const mode of ["chunked", "single-stream", "duplex"]) {
    it(`fallback syncIn places the same remote tree as upstream's (${mode})`, () =>
      seeded(async (rng) => {
        const source = freshDir("ws");
        await writeWorkspace(rng, source);
        const single = path.join(freshDir("file"), "tool.sh");
        writeFileSync(single, "#!/bin/sh\necho hi\n");
        chmodSync(single, 0o644);
        const out = {};
        for (const [name, create] of [
          ["ours", createCommandManagedRuntimeClient],
          ["upstream", upstream.createCommandManagedRuntimeClient],
        ]) {
          const root = freshDir(`remote-${name}`);
          const { runner, calls, channel } = spawnRunner({
            singleStream: mode === "single-stream",
            duplex: mode === "duplex" && name === "ours",
          });
          const client = create({ runner, commandCwd: "/", timeoutMs: 30_000 });
          const result = await client.syncIn([
            {
              operationId: "op-1",
              files: [
                { sourcePath: source, targetPath: path.join(root, "ws"), kind: "directory", exclude: ["node_modules"] },
                { sourcePath: single, targetPath: path.join(root, "bin", "tool.sh"), kind: "file", mode: 0o755 },
              ],
              postUploadCommands: [
                { command: `printf done > ${path.join(root, "marker")}`, cwd: path.join(root, "ws") },
              ],
            },
          ]);
          out[name] = { result, calls, channel, tree: treeState(root) };
        }
        const strip = (tree) =>
          Object.fromEntries(Object.entries(tree).map(([k, v]) => [k, { ...v, mtime: undefined }]));
        expect(strip(out.ours.tree)).toEqual(strip(out.upstream.tree));
        expect(out.ours.tree["ws/node_modules"]).toBeUndefined();
        const { bytes } = await packDirectoryToFile({
          localDir: source,
          archivePath: path.join(freshDir("tar"), "ws.tar"),
          exclude: ["node_modules"],
        });
        expect(out.ours.result).toEqual({
          operations: [{ operationId: "op-1", filesTransferred: 2, bytesTransferred: bytes + 18 }],
        });
        if (mode === "duplex") {
          expect(out.ours.channel.opened).toBe(2);
          // Only the channel carried bytes: no base64 stdin at all.
          expect(out.ours.calls.every((call) => call.stdinLength === null)).toBe(true);
          // Backpressure: never more than the window (4 blocks of 4 MiB) unacknowledged.
          expect(out.ours.channel.maxUnacked).toBeLessThanOrEqual(16 * 1024 * 1024);
        } else {
          expect(out.ours.calls.map((c) => c.script.replace(/\/[^ ']*\//g, "/")).length).toBe(
            out.upstream.calls.length,
          );
          for (const call of out.ours.calls)
            expect(call.stdinLength ?? 0).toBeLessThanOrEqual(mode === "chunked" ? 4 * 1024 * 1024 : 96 * 1024 * 1024);
        }
      }));
  }

  it("fallback syncIn creates no host temp file or directory and never base64-encodes more than a slice", () =>
    seeded(async (rng) => {
      const source = freshDir("ws");
      await writeWorkspace(rng, source);
      writeFileSync(path.join(source, "more.bin"), Buffer.alloc(7 * 1024 * 1024, 3));
      const root = freshDir("remote");
      // A private TMPDIR (os.tmpdir() reads it per call): anything the client stages lands
      // here, and the runner looks at it during every remote call.
      const tmp = freshDir("tmp");
      const seenInTmp = new Set();
      const { runner } = spawnRunner({
        onCall: () => {
          for (const name of readdirSync(tmp)) seenInTmp.add(name);
        },
      });
      const client = createCommandManagedRuntimeClient({ runner, commandCwd: "/", timeoutMs: 30_000 });
      const savedTmp = process.env.TMPDIR;
      process.env.TMPDIR = tmp;
      const original = Buffer.prototype.toString;
      let largest = 0;
      Buffer.prototype.toString = function guarded(encoding, start, end) {
        if (encoding === "base64") largest = Math.max(largest, this.byteLength);
        return original.call(this, encoding, start, end);
      };
      try {
        await client.syncIn([
          { operationId: "op", files: [{ sourcePath: source, targetPath: path.join(root, "ws"), kind: "directory" }] },
        ]);
      } finally {
        Buffer.prototype.toString = original;
        if (savedTmp === undefined) delete process.env.TMPDIR;
        else process.env.TMPDIR = savedTmp;
      }
      expect([...seenInTmp]).toEqual([]);
      expect(readdirSync(tmp)).toEqual([]);
      expect(largest).toBeLessThanOrEqual(3 * 1024 * 1024);
      expect(treeState(path.join(root, "ws"))["more.bin"].size).toBe(7 * 1024 * 1024);
    }));

  it("fallback syncIn of file mappings closes each source once: no stray close error, no descriptor left", async () => {
    // A file mapping's source stream and its file handle once both closed the same
    // descriptor: the later close failed as an uncaught EBADF (or closed another file that
    // had taken the number), about once in fifteen uploads with a runner that answers at once.
    const dir = freshDir("many-files");
    const files = Array.from({ length: 40 }, (_, i) => {
      const file = path.join(dir, `f${i}`);
      writeFileSync(file, Buffer.alloc(1000 + i, i));
      return file;
    });
    const answer = (exitCode) => ({
      exitCode,
      signal: null,
      timedOut: false,
      stdout: "",
      stderr: "",
      pid: 1,
      startedAt: "",
    });
    let call = 0;
    // Every 7th call fails: the uploads that stop early close their sources too.
    const runner = { execute: async () => answer((call += 1) % 7 === 0 ? 1 : 0) };
    const client = createCommandManagedRuntimeClient({ runner, commandCwd: "/", timeoutMs: 30_000 });
    const openFds = () => readdirSync("/proc/self/fd").length;
    const stray = [];
    const onUncaught = (error) => stray.push(`${error.code} ${error.syscall}`);
    process.prependListener("uncaughtException", onUncaught);
    try {
      const before = openFds();
      let failed = 0;
      for (let round = 0; round < 30; round += 1) {
        for (const [i, file] of files.entries()) {
          await client
            .syncIn([
              { operationId: `op-${i}`, files: [{ sourcePath: file, targetPath: `/nowhere/${i}`, kind: "file" }] },
            ])
            .catch(() => (failed += 1));
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(failed).toBeGreaterThan(100);
      expect(stray).toEqual([]);
      expect(openFds()).toBe(before);
    } finally {
      process.removeListener("uncaughtException", onUncaught);
    }
  });

  it("a runner that fails mid-upload rejects with upstream's message and leaves no remote file", async () => {
    const root = freshDir("remote");
    const payload = Buffer.alloc(10 * 1024 * 1024, 7);
    const target = path.join(root, "payload.bin");
    // Call 1 creates the staged file, call 2 is the first slice, call 3 fails.
    const { runner, calls } = spawnRunner({ failOnCall: 3 });
    const client = createCommandManagedRuntimeClient({ runner, commandCwd: "/", timeoutMs: 30_000 });
    await expect(client.writeFile(target, payload)).rejects.toThrow(
      /^base64 -d >> '.*\.paperclip-upload\.[0-9a-f-]+' failed with exit code 1:\nstderr: injected transport failure$/,
    );
    expect(readdirSync(root)).toEqual([]);
    expect(calls.at(-1).script).toMatch(/^rm -rf '.*\.paperclip-upload\./);
  });

  it("a duplex upload whose remote command fails rejects and leaves no remote file", async () => {
    const root = freshDir("remote");
    mkdirSync(path.join(root, "blocked"));
    chmodSync(path.join(root, "blocked"), 0o500);
    const { runner } = spawnRunner({ duplex: true });
    const client = createCommandManagedRuntimeClient({ runner, commandCwd: "/", timeoutMs: 30_000 });
    const target = path.join(root, "blocked", "x.bin");
    const failing = process.getuid?.() === 0 ? path.join("/proc", "x.bin") : target;
    await expect(client.writeFile(failing, Buffer.alloc(2 * 1024 * 1024 + 5, 1))).rejects.toThrow(
      /failed with exit code [1-9]/,
    );
    expect(existsSync(target)).toBe(false);
    chmodSync(path.join(root, "blocked"), 0o700);
    expect(readdirSync(path.join(root, "blocked"))).toEqual([]);
  });

  it("a duplex upload of a source that yields fewer bytes than announced fails and leaves nothing", async () => {
    const root = freshDir("remote");
    const { runner } = spawnRunner({ duplex: true });
    const client = createCommandManagedRuntimeClient({ runner, commandCwd: "/", timeoutMs: 30_000 });
    await expect(
      client.writeStream(path.join(root, "x.bin"), [Buffer.alloc(100)], { totalBytes: 200 }),
    ).rejects.toThrow(/produced 100 bytes, expected 200/);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(readdirSync(root)).toEqual([]);
  });

  it("readStream yields the remote file slice by slice and reports ENOENT like readFile", async () => {
    const root = freshDir("remote");
    const payload = Buffer.alloc(7 * 1024 * 1024 + 3);
    for (let i = 0; i < payload.length; i += 1) payload[i] = i & 0xff;
    writeFileSync(path.join(root, "f.bin"), payload);
    const { runner } = spawnRunner();
    const client = createCommandManagedRuntimeClient({ runner, commandCwd: "/", timeoutMs: 30_000 });
    const sizes = [];
    const parts = [];
    for await (const slice of client.readStream(path.join(root, "f.bin"))) {
      sizes.push(slice.length);
      parts.push(slice);
    }
    expect(sizes).toEqual([3 * 1024 * 1024, 3 * 1024 * 1024, 1024 * 1024 + 3]);
    expect(Buffer.concat(parts).equals(payload)).toBe(true);
    await expect(client.readFile(path.join(root, "missing"))).rejects.toMatchObject({
      code: "ENOENT",
      path: path.join(root, "missing"),
    });
  });

  it("readStream through a duplex channel yields the exact bytes, asking for at most 4 blocks ahead", async () => {
    const root = freshDir("remote");
    const payload = Buffer.alloc(21 * 1024 * 1024 + 77);
    for (let i = 0; i < payload.length; i += 1) payload[i] = (i * 13) & 0xff;
    writeFileSync(path.join(root, "f.bin"), payload);
    writeFileSync(path.join(root, "empty.bin"), "");
    const { runner, calls, channel } = spawnRunner({ duplex: true });
    const client = createCommandManagedRuntimeClient({ runner, commandCwd: "/", timeoutMs: 30_000 });
    const parts = [];
    const progress = [];
    for await (const slice of client.readStream(path.join(root, "f.bin"), {
      onProgress: (done, total) => {
        progress.push([done, total]);
      },
    })) {
      parts.push(slice);
      // A slow consumer: the sandbox must not run ahead of it.
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(Buffer.concat(parts).equals(payload)).toBe(true);
    expect(parts.map((p) => p.length)).toEqual([1, 2, 3, 4, 5].map(() => 4 * 1024 * 1024).concat([1024 * 1024 + 77]));
    expect(progress.at(-1)).toEqual([payload.length, payload.length]);
    expect(channel.maxOutstandingRequests).toBeLessThanOrEqual(4);
    expect(calls).toEqual([]);
    const empty = [];
    for await (const slice of client.readStream(path.join(root, "empty.bin"))) empty.push(slice);
    expect(empty).toEqual([]);
    const missing = (async () => {
      for await (const slice of client.readStream(path.join(root, "missing.bin"))) void slice;
    })();
    await expect(missing).rejects.toThrow(/failed with exit code 1/);
  });

  it("delegates to a native runner's syncIn/syncOut with no execute call", async () => {
    const seen = [];
    const runner = {
      allowConcurrentSyncOperations: true,
      execute: async () => {
        throw new Error("no execute expected");
      },
      syncIn: async (ops) => {
        seen.push(["in", ops]);
        return { operations: [] };
      },
      syncOut: async (ops) => {
        seen.push(["out", ops]);
        return { operations: [] };
      },
    };
    const client = createCommandManagedRuntimeClient({ runner, commandCwd: "/", timeoutMs: 1000 });
    const ops = [{ operationId: "a", files: [{ sourcePath: "/h/x", targetPath: "/r/x", kind: "file" }] }];
    await client.syncIn(ops);
    await client.syncOut(ops);
    expect(seen).toEqual([
      ["in", ops],
      ["out", ops],
    ]);
    expect(client.allowConcurrentSyncOperations).toBe(true);
    await expect(client.syncIn([{ ...ops[0], postUploadCommands: [{ command: "x", cwd: "/etc" }] }])).rejects.toThrow(
      "post-upload command cwd escapes the operation's target root: /etc",
    );
    expect(seen.length).toBe(2);
  });
});

describe("confinement guards match upstream's on generated paths", () => {
  const pieces = [
    "",
    "/",
    "a",
    "..",
    ".",
    "//",
    "b/..",
    "r",
    "r/",
    "r/x",
    "/r",
    "/r/",
    "/r/x",
    "/r/../x",
    "/r/./x",
    "/rx",
    "/r/..",
    "/../r",
  ];
  const outcome = (fn) => {
    try {
      fn();
      return "ok";
    } catch (error) {
      return error.message;
    }
  };
  it("assertSyncOperationsConfined and assertPostUploadCommandsConfined throw the same messages", () =>
    seeded(async (rng) => {
      for (let i = 0; i < 2000; i += 1) {
        const join = () => Array.from({ length: 1 + rng.int(3) }, () => rng.pick(pieces)).join("");
        const ops = [
          {
            operationId: "o",
            files: [{ sourcePath: join(), targetPath: join(), kind: "file" }],
            postUploadCommands: [{ command: "c", cwd: rng.chance(0.2) ? undefined : join() }],
          },
        ];
        const roots = {
          sourceRoots: [rng.pick(["/r", "/r/", "/", "/h"])],
          targetRoots: [rng.pick(["/r", "/r/", "/", "/t"])],
        };
        expect(outcome(() => assertSyncOperationsConfined(ops, roots))).toBe(
          outcome(() => upstreamSandbox.assertSyncOperationsConfined(ops, roots)),
        );
        expect(outcome(() => assertPostUploadCommandsConfined(ops))).toBe(
          outcome(() => upstream.assertPostUploadCommandsConfined(ops)),
        );
      }
    }));
});
