// Packs one directory with ours and upstream in this process's locale (LANG) and prints the
// order of the top-level members of both archives.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { oracle } from "./oracle.js";
import * as ours from "@paperclipai/adapter-utils-native/sandbox-managed-runtime";
const upstream = await oracle("sandbox-managed-runtime");

/** Top-level member names in archive order, from the raw ustar/GNU headers. */
function topLevelOrder(file) {
  const raw = readFileSync(file);
  const out = [];
  for (let offset = 0; offset + 512 <= raw.length; offset += 512) {
    const name = raw
      .subarray(offset, offset + 100)
      .toString("utf8")
      .replace(/\0.*$/s, "");
    if (name === "") break;
    const size = parseInt(
      raw
        .subarray(offset + 124, offset + 136)
        .toString("latin1")
        .replace(/\0.*$/s, "")
        .trim() || "0",
      8,
    );
    offset += Math.ceil(size / 512) * 512;
    const top = name.replace(/\/$/, "");
    if (!top.includes("/")) out.push(top);
  }
  return out;
}

const root = process.argv[2];
const tmp = mkdtempSync(path.join(os.tmpdir(), "pc-order-"));
try {
  await ours.createTarballFromDirectory({ localDir: root, archivePath: path.join(tmp, "ours.tar") });
  await upstream.createTarballFromDirectory({ localDir: root, archivePath: path.join(tmp, "theirs.tar") });
  console.log(
    JSON.stringify({
      ours: topLevelOrder(path.join(tmp, "ours.tar")),
      upstream: topLevelOrder(path.join(tmp, "theirs.tar")),
    }),
  );
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
