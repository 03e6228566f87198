// The names of the prebuilt binaries, in one place: the platform name of a Rust target
// (napi-rs's `npm/<platform>/` names), the platform package that carries its binary, and the
// platform this process runs on. Used by the loader's errors (lib/native.js), the doctor and
// the release packer (scripts/release/pack.mjs).

/** The npm name of the root package. */
export const PACKAGE_NAME = "@paperclipai/adapter-utils-native";

/** The file name of a platform's binary (`binaryName` of package.json's `napi` block). */
export function binaryFileName(platform) {
  return `adapter-utils-native.${platform}.node`;
}

/** The npm package that carries `platform`'s binary, e.g. `@paperclipai/adapter-utils-native-linux-x64-gnu`. */
export function platformPackageName(platform) {
  return `${PACKAGE_NAME}-${platform}`;
}

/** napi-rs's platform name of a Rust target triple: `x86_64-unknown-linux-gnu` → `linux-x64-gnu`. */
export function platformOfTarget(triple) {
  const [arch, , system, abi] = triple.split("-");
  const cpu = { x86_64: "x64", aarch64: "arm64" }[arch];
  if (!cpu) throw new Error(`no platform name for ${triple}`);
  if (system === "darwin") return `darwin-${cpu}`;
  if (system === "linux" && (abi === "gnu" || abi === "musl")) return `linux-${cpu}-${abi}`;
  throw new Error(`no platform name for ${triple}`);
}

/** The platform this process runs on, in the same naming: `linux-x64-gnu`, `darwin-arm64`, … */
export function currentPlatform() {
  if (process.platform !== "linux") return `${process.platform}-${process.arch}`;
  const glibc = process.report?.getReport?.().header?.glibcVersionRuntime;
  return `linux-${process.arch}-${glibc ? "gnu" : "musl"}`;
}
