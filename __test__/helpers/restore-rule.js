// The rule every lane's restore keeps (docs/differences.md, "Nothing the agent did not
// change"), as a check on tree states: each host path ends either as the agent made it or as
// the host held it when the restore began. States are `contentState` maps (./git-state.js):
// path → "dir <mode>", "file <mode> <sha256>", "link <target>" or "special <mode>".
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { contentState } from "./git-state.js";
import { HEAVY_EXCLUDES } from "../../lib/sandbox/steps.js";
import { copyTree } from "./merge-triples.js";

/** A tree's state for the rule: `contentState` without the repository and our runtime directory. */
export const ruleState = (dir) => contentState(dir, [".git", ".paperclip-runtime"]);

const kind = (value) => value?.split(" ")[0];
const mode = (value) => (kind(value) === "file" || kind(value) === "dir" ? value.split(" ")[1] : null);
/** A state without its mode (kind and bytes, or kind and link target). */
const withoutMode = (value) =>
  kind(value) === "file" ? `file ${value.split(" ")[2]}` : kind(value) === "dir" ? "dir" : value;

const ancestors = (relative) => {
  const out = [];
  for (let at = relative.lastIndexOf("/"); at > 0; at = relative.lastIndexOf("/", at - 1))
    out.push(relative.slice(0, at));
  return out;
};
/** Whether octal mode `to` is `from` with only group, other or special bits cleared. */
const narrowedOnly = (from, to) => {
  const [a, b] = [parseInt(from, 8), parseInt(to, 8)];
  return a !== b && (b & ~a) === 0 && (a & ~b & ~0o7077) === 0;
};
const below = (state, relative) => Object.keys(state).some((key) => key.startsWith(`${relative}/`));

/**
 * The paths where a restore broke the rule, `{ path: reason }` (empty when it held):
 * - `restored`: the host after the restore; `host`: the host when the restore began;
 *   `hostBaseline`: the host when the prepare took its baseline (what the run started from);
 * - `sandboxStart`, `sandboxEnd`: the remote workspace after the prepare and when the restore
 *   began (the agent's work is their difference);
 * - `returnable(path)`: whether the pull can bring `path` back (GNU tar's excludes);
 * - `upstream` (optional): upstream's restore of a twin; where ours differs from it, ours must
 *   have kept the host's copy of a path upstream lost (a differential test's check).
 *
 * A path the agent did not change (or that cannot come back) stays the host's; a path the
 * host changed during the run stays the host's; a FIFO, socket or device stays the host's; a
 * file whose mode alone the agent changed takes that mode and keeps the host's bytes; a path the agent changed arrives with the
 * agent's kind and bytes, and with the agent's mode where the agent changed the mode (else
 * the host's); a directory the agent removed stays when it still holds something that stays;
 * nothing is placed below a path kept as a file.
 */
export function restoreRuleBreaks({ restored, host, hostBaseline, sandboxStart, sandboxEnd, returnable, upstream }) {
  const breaks = {};
  const paths = new Set([
    ...Object.keys(restored),
    ...Object.keys(host),
    ...Object.keys(sandboxStart),
    ...Object.keys(sandboxEnd),
  ]);
  const agentChanged = (relative) => sandboxStart[relative] !== sandboxEnd[relative];
  const hostChanged = (relative) => host[relative] !== hostBaseline[relative];
  const agentBelow = (relative) =>
    Object.keys(sandboxEnd).some(
      (key) => key.startsWith(`${relative}/`) && agentChanged(key) && restored[key] === sandboxEnd[key],
    );
  // Below a path kept as the host holds it (a file, a link, or nothing: a host deletion),
  // nothing of the agent's can be placed.
  const blocked = (relative) =>
    ancestors(relative).some((above) => restored[above] === host[above] && kind(host[above]) !== "dir");
  for (const relative of paths) {
    const [now, was, end] = [restored[relative], host[relative], sandboxEnd[relative]];
    // FIFOs, sockets and devices are the host's own, whatever the agent did with them.
    const special = kind(was) === "special" || kind(end) === "special" || kind(sandboxStart[relative]) === "special";
    if (!agentChanged(relative) || !returnable(relative) || hostChanged(relative) || special) {
      // A directory the host lacked, made to hold what the agent added below it, is the agent's.
      const holdsAgentWork = was === undefined && kind(now) === "dir" && kind(end) === "dir" && agentBelow(relative);
      if (now !== was && !holdsAgentWork)
        breaks[relative] = `expected the host's ${was ?? "absence"}, found ${now ?? "nothing"}`;
      continue;
    }
    if (blocked(relative)) {
      if (now !== was)
        breaks[relative] = `below a kept file: expected the host's ${was ?? "absence"}, found ${now ?? "nothing"}`;
      continue;
    }
    if (end === undefined) {
      // Removed by the agent: gone, or a directory still holding what stays.
      if (now !== undefined && !(kind(now) === "dir" && below(restored, relative)))
        breaks[relative] = `removed by the agent, found ${now}`;
      continue;
    }
    if (kind(end) === "file" || kind(end) === "link") {
      // Replaced a host directory: the directory stays when it holds what stays.
      if (kind(was) === "dir" && now === was && below(restored, relative)) continue;
    }
    // A file whose mode alone the agent changed keeps the host's bytes (where the remote
    // started from others: a checkout's blob under a filter) and takes the agent's mode.
    const start = sandboxStart[relative];
    const modeOnly = kind(start) === "file" && kind(end) === "file" && withoutMode(start) === withoutMode(end);
    const wantedBytes = modeOnly && kind(was) === "file" ? withoutMode(was) : withoutMode(end);
    if (withoutMode(now) !== wantedBytes) {
      breaks[relative] = `expected the agent's ${end}, found ${now ?? "nothing"}`;
      continue;
    }
    if (kind(end) === "file") {
      const agentMode = kind(start) !== "file" || mode(start) !== mode(end);
      const wanted = agentMode || kind(was) !== "file" ? mode(end) : mode(was);
      // The documented limit (docs/differences.md): a mode that is what the host sent with
      // only group, other or special bits cleared is what an extraction under the remote's
      // umask leaves, so it may be taken for the transfer's and the host's mode kept.
      const sent = hostBaseline[relative];
      const transferLike = kind(sent) === "file" && narrowedOnly(mode(sent), mode(end)) && mode(now) === mode(was);
      if (mode(now) !== wanted && !transferLike) breaks[relative] = `expected mode ${wanted}, found ${now}`;
    }
  }
  if (upstream) {
    for (const relative of new Set([...Object.keys(restored), ...Object.keys(upstream)])) {
      const [now, theirs, was] = [restored[relative], upstream[relative], host[relative]];
      if (now === theirs || breaks[relative]) continue;
      // Ours kept the host's copy where upstream's did not, or the agent's bytes with the
      // host's mode where upstream's took the remote's.
      const kept = now === was;
      const keptMode = withoutMode(now) === withoutMode(theirs) && mode(now) === mode(was);
      const keptDir = kind(now) === "dir" && theirs === undefined && below(restored, relative);
      if (!(kept || keptMode || keptDir))
        breaks[relative] = `upstream's ${theirs ?? "absence"}, ours ${now ?? "nothing"}`;
    }
  }
  // Each break with what the rule saw there.
  for (const relative of Object.keys(breaks)) {
    breaks[relative] +=
      ` (sandbox ${sandboxStart[relative] ?? "-"} -> ${sandboxEnd[relative] ?? "-"};` +
      ` host ${hostBaseline[relative] ?? "-"} -> ${host[relative] ?? "-"})`;
  }
  return breaks;
}

/**
 * The paths GNU tar archives of `dir` with `exclude` (and `._*`, as every tar of the lanes):
 * what a pull can bring back, less our key file's name, which a restore never takes
 * (docs/reliability.md, "No name we reserve arrives from outside"). The runtime directory and
 * the top-level `.git` are left out.
 */
export function tarMembers(dir, exclude) {
  const leftOut = ["._*", ".paperclip-staging-key", ...exclude];
  const args = ["-C", dir, ...leftOut.map((entry) => `--exclude=${entry}`), "-cf", "-", "."];
  const archive = execFileSync("tar", args, { maxBuffer: 1 << 30 });
  const listing = execFileSync("tar", ["--quoting-style=literal", "-tf", "-"], {
    input: archive,
    maxBuffer: 1 << 28,
    encoding: "utf8",
  });
  return new Set(
    listing
      .split("\n")
      .map((line) => line.replace(/^\.\//, "").replace(/\/$/, ""))
      .filter((line) => line && line !== "." && !/^(\.git|\.paperclip-runtime)(\/|$)/.test(line)),
  );
}

/**
 * Records on `pair` (a differential test's `{ local, remote, twin }`: our host workspace and
 * sandbox, upstream's twin host) what a run starts from, once prepared: the host, the sandbox,
 * and what a pull with `excludes` can bring back.
 */
export function recordRunStart(pair, excludes) {
  pair.rule = {
    excludes,
    hostBaseline: ruleState(pair.local),
    sandboxStart: ruleState(pair.remote),
    startMembers: tarMembers(pair.remote, excludes),
  };
}

/** Records on `pair` what the restore begins with: the host (edited during the run) and the agent's sandbox. */
export function recordRunEnd(pair) {
  Object.assign(pair.rule, {
    host: ruleState(pair.local),
    sandboxEnd: ruleState(pair.remote),
    endMembers: tarMembers(pair.remote, pair.rule.excludes),
  });
}

/**
 * Where our restore of `pair` broke the rule, upstream's twin as the differential (where they
 * differ, ours kept the host's copy of a path upstream lost) unless `upstreamFailed` (a
 * conflict upstream's merge fails on and ours keeps). Then the twin becomes a copy of ours:
 * each round starts both sides from one workspace.
 */
export function pairRuleBreaks(pair, { upstreamFailed = false } = {}) {
  const { rule } = pair;
  const breaks = restoreRuleBreaks({
    restored: ruleState(pair.local),
    host: rule.host,
    hostBaseline: rule.hostBaseline,
    sandboxStart: rule.sandboxStart,
    sandboxEnd: rule.sandboxEnd,
    returnable: (relative) => rule.startMembers.has(relative) || rule.endMembers.has(relative),
    upstream: upstreamFailed ? undefined : ruleState(pair.twin),
  });
  rmSync(pair.twin, { recursive: true, force: true });
  copyTree(pair.local, pair.twin);
  return breaks;
}

/**
 * The sandbox restore's `--exclude` values for a workspace prepared with `options`
 * (`workspaceExclude`, `preserveAbsentOnRestore`) whose git ignores are `ignored` (docs/sandbox.md).
 */
export function sandboxPullExcludes(options = {}, ignored = []) {
  return [
    ...HEAVY_EXCLUDES,
    ".git",
    ".git/*",
    ".paperclip-runtime",
    ...(options.preserveAbsentOnRestore ?? []),
    ...(options.workspaceExclude ?? []),
    ...ignored,
  ];
}
