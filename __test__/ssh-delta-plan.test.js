// The delta plan of the SSH lane (lib/tree-delta.js `planDelta`, shared with the sandbox lane) on hand-made listings: what
// is sent, what is removed first, and which directories are sent again so their mode and
// mtime end as the full upload leaves them. (The end-to-end differential tests against
// upstream's full upload are in ssh-delta.test.js.)
import { describe, expect, it } from "vitest";
import { planDelta } from "../lib/tree-delta.js";

const NS = 1_000_000_000n;
const local = (member, kind, { size = 0, mode = 0o644, mtime = 100, ctime = 200, ino = 1, link = null } = {}) => ({
  member,
  kind,
  size,
  mode,
  mtimeNs: String(BigInt(mtime) * NS),
  ctimeNs: String(BigInt(ctime) * NS),
  ino: String(ino),
  dev: "9",
  link,
});
const remote = (
  kind,
  { size = 0, mode = 0o644, mtime = 100, ctime = "300.0000000000", ino = "7", link = "" } = {},
) => ({
  kind,
  size,
  mtime: `${mtime}.0000000000`,
  mtimeS: mtime,
  ctime,
  ino,
  mode,
  link,
});
const header = { umask: 0o022, uid: 1000 };
/** The manifest row of a file sent as `l` that became `r` remotely. */
const row = (l, r) => [l.size, l.mtimeNs, l.ctimeNs, l.ino, l.dev, r.size, r.mtime, r.ctime, r.ino, r.mode];

describe("planDelta", () => {
  it("leaves alone what both sides still hold as recorded, sends the rest, removes extras outermost first", () => {
    const same = local("src/same.ts", "f", { size: 5 });
    const sameRemote = remote("f", { size: 5 });
    const edited = local("src/edited.ts", "f", { size: 5, ctime: 999 });
    const editedRemote = remote("f", { size: 5 });
    const touchedRemote = local("src/touched.ts", "f", { size: 5 });
    const locals = [
      local("src", "d", { mode: 0o755 }),
      same,
      edited,
      touchedRemote,
      local("new.txt", "f", { size: 1 }),
      local("link", "l", { link: "src" }),
    ];
    const listing = new Map([
      ["src", remote("d", { mode: 0o755 })],
      ["src/same.ts", sameRemote],
      ["src/edited.ts", editedRemote],
      // Same size and mtime, but another ctime than recorded: the remote copy changed.
      ["src/touched.ts", remote("f", { size: 5, ctime: "301.0000000000" })],
      ["link", remote("l", { link: "elsewhere" })],
      ["extra", remote("d", { mode: 0o755 })],
      ["extra/inside.txt", remote("f", { size: 3 })],
      ["src/gone.ts", remote("f", { size: 3 })],
    ]);
    const manifest = {
      files: {
        "src/same.ts": row(same, sameRemote),
        "src/edited.ts": row(local("src/edited.ts", "f", { size: 5 }), editedRemote),
        "src/touched.ts": row(touchedRemote, remote("f", { size: 5 })),
      },
    };
    const plan = planDelta(locals, listing, manifest, header);
    expect([...plan.send].sort()).toEqual(["link", "new.txt", "src", "src/edited.ts", "src/touched.ts"]);
    // `extra/inside.txt` goes with `extra`; `src/gone.ts` on its own.
    expect([...plan.remove].sort()).toEqual(["extra", "src/gone.ts"]);
  });

  it("replaces an entry of another kind and restores a directory's mode and mtime", () => {
    const locals = [
      local("a", "f", { size: 1 }),
      local("d", "d", { mode: 0o750, mtime: 100 }),
      local("e", "d", { mode: 0o755, mtime: 50 }),
    ];
    const listing = new Map([
      ["a", remote("d", { mode: 0o755 })],
      ["a/x", remote("f")],
      // 0o750 under umask 022 is 0o750: the mode matches, the mtime does not.
      ["d", remote("d", { mode: 0o750, mtime: 101 })],
      ["e", remote("d", { mode: 0o755, mtime: 50 })],
    ]);
    const plan = planDelta(locals, listing, { files: {} }, header);
    expect([...plan.remove].sort()).toEqual(["a"]);
    expect([...plan.send].sort()).toEqual(["a", "d"]);
  });

  it("expects the umask on a non-root remote and the archived mode for root", () => {
    const file = local("f", "f", { size: 1, mode: 0o666 });
    const theirs = remote("f", { size: 1, mode: 0o644 });
    const manifest = { files: { f: row(file, theirs) } };
    expect([...planDelta([file], new Map([["f", theirs]]), manifest, header).send]).toEqual([]);
    expect([...planDelta([file], new Map([["f", theirs]]), manifest, { umask: 0o022, uid: 0 }).send]).toEqual(["f"]);
  });
});
