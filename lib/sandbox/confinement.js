// Host-side confinement guards for sandbox sync operations: every mapping's source and
// target must sit under an orchestrator-owned root, and every post-upload command's `cwd`
// under one of its operation's own targets, before anything is handed to a provider. Pure
// string checks on POSIX paths (sandbox and server paths are POSIX), with upstream's
// messages.
import path from "node:path";

/** `candidate` (already normalised) equals `root` or lies below it. */
function isWithin(candidate, root) {
  const normalizedRoot = path.posix.normalize(root);
  if (candidate === normalizedRoot) return true;
  const prefix = normalizedRoot.endsWith("/") ? normalizedRoot : `${normalizedRoot}/`;
  return candidate.startsWith(prefix);
}

/** A normalised path that still climbs (`..` as a whole segment). */
function climbs(normalized) {
  return (
    normalized === ".." || normalized.startsWith("../") || normalized.includes("/../") || normalized.endsWith("/..")
  );
}

/**
 * Throws unless every mapping's `sourcePath` lies in one of `roots.sourceRoots` and every
 * `targetPath` in one of `roots.targetRoots` (after POSIX normalisation; absolute; no `..`
 * left).
 */
export function assertSyncOperationsConfined(operations, roots) {
  const check = (candidate, allowed, label) => {
    const normalized = path.posix.normalize(candidate);
    if (!path.posix.isAbsolute(normalized) || climbs(normalized)) {
      throw new Error(`sync operation ${label} path is not a confined absolute path: ${candidate}`);
    }
    if (!allowed.some((root) => isWithin(normalized, root))) {
      throw new Error(`sync operation ${label} path escapes its confinement root: ${candidate}`);
    }
  };
  for (const operation of operations) {
    for (const mapping of operation.files) {
      check(mapping.sourcePath, roots.sourceRoots, "source");
      check(mapping.targetPath, roots.targetRoots, "target");
    }
  }
}

/**
 * Throws unless every post-upload command `cwd` that is given is an absolute POSIX path
 * without a `..` segment, equal to or below one of its operation's `targetPath`s.
 */
export function assertPostUploadCommandsConfined(operations) {
  for (const operation of operations) {
    const commands = operation.postUploadCommands ?? [];
    if (commands.length === 0) continue;
    // Upstream compares against `<target>/` literally (a `/` target admits only itself).
    const targets = operation.files.map((mapping) => path.posix.normalize(mapping.targetPath));
    for (const { cwd } of commands) {
      if (cwd == null) continue;
      if (!path.posix.isAbsolute(cwd) || cwd.split("/").includes("..")) {
        throw new Error(`post-upload command cwd is not a confined absolute POSIX path: ${cwd}`);
      }
      const normalized = path.posix.normalize(cwd);
      if (!targets.some((target) => normalized === target || normalized.startsWith(`${target}/`))) {
        throw new Error(`post-upload command cwd escapes the operation's target root: ${cwd}`);
      }
    }
  }
}
