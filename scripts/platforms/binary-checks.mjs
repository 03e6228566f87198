// The static checks of one built `.node`, by what its platform can be checked with on a Linux
// x64 machine: read from the file itself (binutils' readelf for ELF, Debian's llvm-objdump and
// llvm-nm for Mach-O), no loading. `npm run pack:release` refuses a binary that fails one and
// `npm run test:platforms` prints them as rows of its table.
//
//   every ELF      its architecture; only the addon's entry (`napi_register_module_v1`) exported
//   linux-gnu      shared libraries needed: glibc's and libgcc_s only; every glibc symbol version
//                  within the floor (2.17, scripts/build/check-glibc.mjs); every undefined symbol
//                  versioned (bound to glibc or libgcc at link time) or weak
//   linux-musl     needs only musl's `libc.so`; every undefined symbol (but weak ones) is one
//                  musl's libc.so defines (musl 1.2.5's list, as zig links against)
//   darwin         Mach-O dylib of its architecture; `minos` the deployment target; loads only
//                  libSystem, libiconv and system frameworks; exports the entry only; every
//                  undefined symbol bound to a named dylib (two-level namespace, none looked up
//                  in the flat namespace)
//
// A check installs nothing: the tools it reads a binary with (binutils, zig's musl symbol
// list, Debian's llvm; scripts/build/toolchains.mjs's inspectionTools) are installed by the
// build of the target and by the entry points that check binaries (ensureInspectionTools);
// when one is missing, the check fails with a row `tools` that says which and what installs it.
import { readFileSync } from "node:fs";
import path from "node:path";
import { platformOfTarget } from "../../lib/platforms.js";
import { GLIBC_FLOOR, highestGlibc, newerVersion } from "../build/check-glibc.mjs";
import { inspectionTools, MACOSX_DEPLOYMENT_TARGET, zigLibDir } from "../build/toolchains.mjs";
import { output } from "../lib/shared.mjs";

/** The addon's one entry point: what Node looks up after loading it. */
const ENTRY = "napi_register_module_v1";

/** `{ check, ok, detail }` */
const result = (check, ok, detail) => ({ check, ok: Boolean(ok), detail });

/** A short list for a message: the first `n` items and how many more. */
function some(items, n = 6) {
  return items.length <= n ? items.join(", ") : `${items.slice(0, n).join(", ")} and ${items.length - n} more`;
}

/** The dynamic symbols of an ELF file: `{ name, version, bind, defined }`. */
function elfDynamicSymbols(file) {
  const symbols = [];
  for (const line of output("readelf", ["--dyn-syms", "--wide", file]).split("\n")) {
    const m = /^\s*\d+:\s+[0-9a-f]+\s+\d+\s+(\w+)\s+(\w+)\s+(\w+)\s+(\w+)\s+(\S+)/.exec(line);
    if (!m || m[2] === "LOCAL") continue;
    const [name, version] = m[5].split(/@+/);
    symbols.push({ name, version: version ?? null, bind: m[2], defined: m[4] !== "UND" });
  }
  return symbols;
}

/**
 * The names musl's libc.so defines for `arch` (64-bit): read from the list the zig binary
 * `zig` links musl programs against (zig's lib/libc/musl/libc.S, musl 1.2.5, the musl of
 * current Alpine releases), its `#ifdef ARCH_/FAMILY_/PTR64/TIME32` blocks taken for `arch`.
 */
function muslLibcSymbols(arch, zig) {
  const file = path.join(zigLibDir(zig), "libc", "musl", "libc.S");
  const defined = new Set(["PTR64", `ARCH_${arch}`, `FAMILY_${arch === "x86_64" ? "x86" : arch}`]);
  const names = new Set();
  const stack = []; // whether each open #if block is taken
  const taken = () => stack.every(Boolean);
  for (const raw of readFileSync(file, "utf8").split("\n")) {
    const line = raw.trim();
    let m;
    if ((m = /^#ifdef (\w+)$/.exec(line))) stack.push(defined.has(m[1]));
    else if (line.startsWith("#if ")) {
      // Only conjunctions of (!)defined(X) occur.
      const terms = line
        .slice(4)
        .split("&&")
        .map((t) => t.trim());
      stack.push(
        terms.every((t) => {
          const d = /^(!?)defined\((\w+)\)$/.exec(t);
          if (!d) throw new Error(`${file}: cannot read ${line}`);
          return defined.has(d[2]) !== (d[1] === "!");
        }),
      );
    } else if (line === "#else") stack.push(!stack.pop());
    else if (line === "#endif") stack.pop();
    else if (taken() && (m = /^(?:\.globl|\.weak|WEAK64|WEAKTIME64) (\S+)$/.exec(line))) names.add(m[1]);
  }
  return { libc: `zig's musl libc.S`, names };
}

const GNU_LIBS =
  /^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libgcc_s\.so\.1|ld-linux-(x86-64|aarch64)\.so\.[12])$/;

function elfChecks(triple, file, tools) {
  const [arch, , , abi] = triple.split("-");
  const checks = [];
  const header = output("readelf", ["--file-header", file]);
  const machine = /Machine:\s+(.+)/.exec(header)?.[1].trim();
  const wantMachine = { x86_64: "Advanced Micro Devices X86-64", aarch64: "AArch64" }[arch];
  checks.push(
    result(
      "ELF",
      machine === wantMachine && /Type:\s+DYN/.test(header) && /Class:\s+ELF64/.test(header),
      `${/Class:\s+(\S+)/.exec(header)?.[1]} shared object, ${machine}`,
    ),
  );
  const needed = [...output("readelf", ["--dynamic", file]).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map(
    (m) => m[1],
  );
  const symbols = elfDynamicSymbols(file);
  const exported = symbols.filter((s) => s.defined).map((s) => s.name);
  const undefinedStrong = symbols.filter((s) => !s.defined && s.bind !== "WEAK");
  if (abi === "gnu") {
    const foreign = needed.filter((n) => !GNU_LIBS.test(n));
    checks.push(
      result(
        "needed libraries",
        foreign.length === 0,
        foreign.length ? `not glibc's: ${foreign.join(", ")}` : needed.join(", "),
      ),
    );
    const highest = highestGlibc(file);
    checks.push(
      result("glibc floor", !newerVersion(highest, GLIBC_FLOOR), `needs GLIBC_${highest} (floor ${GLIBC_FLOOR})`),
    );
    const unbound = undefinedStrong.filter((s) => !/^(GLIBC|GCC)_/.test(s.version ?? ""));
    checks.push(
      result(
        "undefined symbols",
        unbound.length === 0,
        unbound.length
          ? `not bound to glibc or libgcc: ${some(unbound.map((s) => s.name))}`
          : `${undefinedStrong.length} bound to glibc/libgcc versions, the rest weak`,
      ),
    );
  } else {
    checks.push(
      result(
        "needed libraries",
        needed.length === 1 && needed[0] === "libc.so",
        needed.join(", ") || "none (a static binary cannot be loaded by Node)",
      ),
    );
    const musl = muslLibcSymbols(arch, tools.find((t) => t.tool.startsWith("zig")).path);
    const notMusl = undefinedStrong.filter((s) => !musl.names.has(s.name));
    checks.push(
      result(
        "undefined symbols",
        notMusl.length === 0,
        notMusl.length
          ? `not in ${musl.libc}: ${some(notMusl.map((s) => s.name))}`
          : `${undefinedStrong.length}, all in musl's libc.so (${musl.libc})`,
      ),
    );
  }
  checks.push(result("exports", exported.length === 1 && exported[0] === ENTRY, some(exported) || "none"));
  return checks;
}

/** Load commands of a Mach-O file, each `{ cmd, fields: { name: value } }`. */
function machoLoadCommands(file) {
  const commands = [];
  let current = null;
  for (const line of output("llvm-objdump", ["--macho", "--private-headers", file]).split("\n")) {
    if (/^Load command \d+/.test(line)) {
      current = { cmd: null, fields: {} };
      commands.push(current);
      continue;
    }
    const m = /^\s*(\w+) (.+)$/.exec(line);
    if (!current || !m) continue;
    if (m[1] === "cmd") current.cmd = m[2].trim();
    else current.fields[m[1]] = m[2].trim();
  }
  return commands;
}

/** The libraries a darwin addon may load: libSystem, libiconv, and frameworks every macOS has. */
const DARWIN_LIBS =
  /^(\/usr\/lib\/libSystem\.B\.dylib|\/usr\/lib\/libiconv\.2\.dylib|\/System\/Library\/Frameworks\/(Security|CoreFoundation)\.framework\/Versions\/A\/(Security|CoreFoundation))$/;

function machoChecks(triple, file) {
  const [arch] = triple.split("-");
  const checks = [];
  const header = output("llvm-objdump", ["--macho", "--private-header", file]);
  const fields = header.trim().split("\n").pop().trim().split(/\s+/);
  const cputype = { x86_64: "X86_64", aarch64: "ARM64" }[arch];
  checks.push(
    result(
      "Mach-O",
      fields[0] === "MH_MAGIC_64" && fields[1] === cputype && fields[4] === "DYLIB",
      `${fields[0]} ${fields[1]} ${fields[4]}`,
    ),
  );
  const commands = machoLoadCommands(file);
  const build = commands.find((c) => c.cmd === "LC_BUILD_VERSION");
  const minos = build?.fields.minos ?? commands.find((c) => c.cmd === "LC_VERSION_MIN_MACOSX")?.fields.version;
  checks.push(
    result(
      "minos",
      minos === MACOSX_DEPLOYMENT_TARGET,
      `macOS ${minos ?? "unknown"} (deployment target ${MACOSX_DEPLOYMENT_TARGET})`,
    ),
  );
  const dylibs = commands
    .filter((c) => /^LC_(LOAD|LOAD_WEAK|REEXPORT|LAZY_LOAD|LOAD_UPWARD)_DYLIB$/.test(c.cmd))
    .map((c) => c.fields.name.replace(/ \(offset \d+\)$/, ""));
  const foreign = dylibs.filter((d) => !DARWIN_LIBS.test(d));
  checks.push(
    result(
      "load commands",
      dylibs.length > 0 && foreign.length === 0,
      foreign.length ? `unexpected: ${foreign.join(", ")}` : dylibs.map((d) => path.basename(d)).join(", "),
    ),
  );
  const exports = output("llvm-objdump", ["--macho", "--exports-trie", file])
    .split("\n")
    .map((l) => /^0x[0-9A-Fa-f]+\s+(\S+)/.exec(l.trim())?.[1])
    .filter(Boolean);
  checks.push(result("exports", exports.length === 1 && exports[0] === `_${ENTRY}`, some(exports) || "none"));
  const undefinedLines = output("llvm-nm", ["-m", "--undefined-only", file])
    .split("\n")
    .filter((l) => l.includes("(undefined)"));
  const unbound = undefinedLines.filter((l) => !/\(from [^)]+\)\s*$/.test(l));
  const from = [...new Set(undefinedLines.map((l) => /\(from ([^)]+)\)\s*$/.exec(l)?.[1]).filter(Boolean))];
  checks.push(
    result(
      "binds",
      undefinedLines.length > 0 && unbound.length === 0,
      unbound.length
        ? `not bound to a dylib: ${some(unbound.map((l) => /external (\S+)/.exec(l)?.[1] ?? l.trim()))}`
        : `${undefinedLines.length} undefined symbols, each bound to ${from.join(" or ")}`,
    ),
  );
  return checks;
}

/**
 * The static checks of `file`, the binary of `triple`: `[{ check, ok, detail }]`. Reads it
 * with binutils (ELF; zig's musl symbol list for musl) or Debian's llvm (Mach-O); when one of
 * those is missing, one failed row `tools` instead, naming what is missing and what installs it.
 */
export function checkBinary(triple, file) {
  const tools = inspectionTools(triple);
  const missing = tools.filter((t) => !t.path);
  if (missing.length > 0) {
    const what = missing.map((t) => `${t.tool} is missing, installed by ${t.install}`).join("; ");
    return [result("tools", false, `not checked: ${what}`)];
  }
  return platformOfTarget(triple).startsWith("darwin") ? machoChecks(triple, file) : elfChecks(triple, file, tools);
}
