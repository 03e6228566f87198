// Error codes defined once: the JS layer reads the core crate's table from the binding
// (`errorCodes()`), and the frozen copy used where no binary loads (lib/error-codes.js) is the
// same table; a native error's structured payload reaches JS with every field (code, message,
// errno, syscall, path, and a breached limit's name and value), and a copy of lib/ with no
// binary still imports and raises its codes. The same for the constants shared with the core
// (`sharedConstants()`, lib/shared-constants.js).
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { extractTarballToDirectory } from "../index.js";
import { FALLBACK_ERROR_CODES } from "../lib/error-codes.js";
import { GIT_ARCHIVE_EXCLUDES, REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES } from "../lib/git-workspace-sync.js";
import { codes, constants, native, nativeLoadError, nativePlatform } from "../lib/native.js";
import { FALLBACK_CONSTANTS } from "../lib/shared-constants.js";
import { RawArchive } from "./helpers/tar.js";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
let work;

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), "pc-error-codes-"));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("error codes", () => {
  it("come from the binding, and the no-binary copy is the same table", () => {
    expect(nativeLoadError).toBeNull();
    const fromBinding = native.errorCodes();
    expect(Object.keys(fromBinding).length).toBeGreaterThan(20);
    expect({ ...codes }).toEqual(fromBinding);
    expect({ ...FALLBACK_ERROR_CODES }).toEqual(fromBinding);
    expect(Object.isFrozen(codes)).toBe(true);
    expect(new Set(Object.values(fromBinding)).size).toBe(Object.keys(fromBinding).length);
  });

  it("every code is in the error-code table (docs/error-codes.md)", () => {
    const table = readFileSync(path.join(root, "docs", "error-codes.md"), "utf8");
    const missing = Object.values(native.errorCodes()).filter(
      (code) =>
        !table.includes(`\`${code}\``) && !table.includes(`\`…_${code.replace(/^ERR_PAPERCLIP_NATIVE_/, "")}\``),
    );
    expect(missing).toEqual([]);
  });

  it("shared constants come from the binding, and the no-binary copy is the same", () => {
    const fromBinding = native.sharedConstants();
    expect(Object.keys(fromBinding).sort()).toEqual(Object.keys(FALLBACK_CONSTANTS).sort());
    expect(fromBinding).toEqual(JSON.parse(JSON.stringify(FALLBACK_CONSTANTS)));
    expect(constants).toEqual(fromBinding);
    expect(Object.isFrozen(constants) && Object.isFrozen(constants.gitArchiveExcludes)).toBe(true);
    expect(GIT_ARCHIVE_EXCLUDES).toEqual(fromBinding.gitArchiveExcludes);
    expect(REFERENCED_SOURCE_IGNORE_MAX_TOTAL_BYTES).toBe(fromBinding.ignoreScanMaxTotalBytes);
  });

  it("a native error arrives with its structured fields", async () => {
    const missing = path.join(work, "no-such-archive.tar");
    const error = await extractTarballToDirectory({ source: missing, localDir: path.join(work, "dest-a") }).then(
      () => null,
      (e) => e,
    );
    expect(error).toBeInstanceOf(Error);
    expect(error.code).toBe("ENOENT");
    expect(error.errno).toBe(-os.constants.errno.ENOENT);
    expect(typeof error.syscall).toBe("string");
    expect(error.path).toBe(missing);
    expect(error.message).toMatch(/^ENOENT: no such file or directory, \w+ '/);
  });

  it("a breached limit carries its name and value from the payload", async () => {
    const archive = new RawArchive().file("a.txt", "x".repeat(100)).file("b.txt", "y".repeat(100)).finish();
    const dest = path.join(work, "dest-b");
    mkdirSync(dest);
    const error = await extractTarballToDirectory({ source: archive, localDir: dest, limits: { maxBytes: 150 } }).then(
      () => null,
      (e) => e,
    );
    expect(error?.code).toBe(codes.ARCHIVE_LIMIT_EXCEEDED);
    expect(error.limit).toBe("maxBytes");
    expect(error.value).toBe(150);
  });

  it("a copy of lib/ without a binary imports and uses the frozen copy", () => {
    const copy = path.join(work, "nobinary");
    cpSync(path.join(root, "lib"), path.join(copy, "lib"), { recursive: true });
    mkdirSync(path.join(copy, "native"));
    cpSync(path.join(root, "native", "binding.cjs"), path.join(copy, "native", "binding.cjs"));
    writeFileSync(path.join(copy, "package.json"), JSON.stringify({ type: "module" }));
    const script = [
      'import { codes, nativeLoadError } from "./lib/native.js";',
      'import { FALLBACK_ERROR_CODES } from "./lib/error-codes.js";',
      'import { INVALID_ARGUMENT } from "./lib/arguments.js";',
      'import { constants } from "./lib/native.js";',
      'import { FALLBACK_CONSTANTS } from "./lib/shared-constants.js";',
      'import { GIT_ARCHIVE_EXCLUDES } from "./lib/git-workspace-sync.js";',
      "const same = codes === FALLBACK_ERROR_CODES && constants === FALLBACK_CONSTANTS;",
      "console.log(JSON.stringify({ same, load: nativeLoadError?.code, INVALID_ARGUMENT, GIT_ARCHIVE_EXCLUDES }));",
    ].join("\n");
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: copy, encoding: "utf8" });
    expect(JSON.parse(out)).toEqual({
      same: true,
      load: FALLBACK_ERROR_CODES.UNSUPPORTED_PLATFORM,
      INVALID_ARGUMENT: FALLBACK_ERROR_CODES.INVALID_ARGUMENT,
      GIT_ARCHIVE_EXCLUDES: [".git", ".git/*"],
    });
  });
});

describe("a binary named by NAPI_RS_NATIVE_LIBRARY_PATH that does not load", () => {
  // napi-rs's loader takes that file in place of the installed one; it reports a missing or
  // unreadable file as "Cannot find module", so the message names the variable and the reason.
  it.each([
    ["missing", () => path.join(work, "missing.node"), /it cannot be read \(ENOENT\)/],
    [
      "not a library",
      () => {
        const file = path.join(work, "junk.node");
        writeFileSync(file, "junk");
        return file;
      },
      /junk\.node: (file too short|invalid ELF header)/,
    ],
  ])("%s: the error names the variable, the reason and what to do", (_, file, reason) => {
    const script = [
      'import { nativeLoadError } from "./lib/native.js";',
      "console.log(JSON.stringify({ code: nativeLoadError?.code, message: nativeLoadError?.message }));",
    ].join("\n");
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      cwd: root,
      encoding: "utf8",
      env: { ...process.env, NAPI_RS_NATIVE_LIBRARY_PATH: file() },
    });
    const { code, message } = JSON.parse(out);
    expect(code).toBe(FALLBACK_ERROR_CODES.UNSUPPORTED_PLATFORM);
    expect(message).toMatch(
      /^@paperclipai\/adapter-utils-native: NAPI_RS_NATIVE_LIBRARY_PATH names a binary that does not load/,
    );
    expect(message).toMatch(reason);
    expect(message).toContain(`Unset it to load the installed @paperclipai/adapter-utils-native-${nativePlatform()}@`);
  });
});
