// The README's "Speed" lines, from the saved results of bench/results/ (bench/table.mjs
// writes them between the README's `<!-- speed:start -->` and `<!-- speed:end -->`): one line
// per hot path (the rows' `hotPath`, bench/summary.mjs), in the order the scripts run, with
// its speed-up per machine kind, the range over the rows of that kind (corpora, modes).
// A row is compared with upstream; without an upstream figure, with what upstream's run
// failed with, the baseline it names, or the system tool it was timed against; a row with
// none of these, and a hot path with no such row, gets no figure.

/** The hot path of a row saved before rows named theirs: its path up to the first comma. */
const hotPathOf = (row) => row.hotPath ?? row.path.split(",")[0];

/** The speed-up `theirs / ours` as the README prints it: 45x, 9.1x, 0.75x. */
function times(theirs, ours) {
  const ratio = theirs / ours;
  return `${ratio >= 10 ? ratio.toFixed(0) : ratio >= 1 ? ratio.toFixed(1) : ratio.toFixed(2)}x`;
}

/** The range of some speed-ups (`9.1–45x`), or the one. */
function range(pairs) {
  const sorted = pairs.slice().sort((a, b) => a[0] / a[1] - b[0] / b[1]);
  const low = times(...sorted[0]);
  const high = times(...sorted[sorted.length - 1]);
  return low === high ? low : `${low.slice(0, -1)}–${high}`;
}

/**
 * What one machine kind's rows of a hot path say: `9.1–45x` against upstream, then the other
 * comparisons (`1.3x \`tar -cf - | cat\``, `9.0x a cold native capture`, `upstream fails on
 * corpus b (ERR_…)`); null when none has a figure.
 */
function kindFigures(rows) {
  const parts = [];
  const withUpstream = rows.filter((r) => r.upstream != null);
  if (withUpstream.length > 0) parts.push(range(withUpstream.map((r) => [r.upstream, r.ours])));
  const others = new Map();
  for (const r of rows.filter((row) => row.upstream == null)) {
    const against = r.baselineMs != null ? r.baseline : r.floorTool && r.floor != null ? `\`${r.floorIs}\`` : null;
    if (against) others.set(against, [...(others.get(against) ?? []), [r.baselineMs ?? r.floor, r.ours]]);
  }
  for (const [against, pairs] of others) parts.push(`${range(pairs)} ${against}`);
  for (const r of rows.filter((row) => row.upstream == null && row.upstreamFails)) parts.push(`upstream fails${r.case ? ` on ${r.case}` : ""} (${r.upstreamFails})`);
  return parts.length > 0 ? parts.join(", ") : null;
}

/** A machine kind as the README names it: its file system when only that tells the kinds apart. */
function kindLabels(results) {
  const split = results.map((r) => r.machine.kind.split(", corpora on "));
  const sameMachine = split.every((parts) => parts.length === 2 && parts[0] === split[0][0]);
  return results.map((r, i) => (sameMachine ? split[i][1] : r.machine.kind));
}

/**
 * The README lines for `results` (the saved results files, each `{ machine, rows, … }`):
 * `- [hot path](link): 9.1–45x on tmpfs, 8.0–30x on disk`. `link`: the benchmark page.
 */
export function speedLines(results, link) {
  const labels = kindLabels(results);
  const hotPaths = [...new Set(results.flatMap((r) => r.rows.map(hotPathOf)))];
  const lines = [];
  for (const hotPath of hotPaths) {
    const perKind = results
      .map((r, i) => [kindFigures(r.rows.filter((row) => hotPathOf(row) === hotPath)), labels[i]])
      .filter(([figures]) => figures != null)
      .map(([figures, label]) => `${figures} on ${label}`);
    if (perKind.length > 0) lines.push(`- [${hotPath}](${link}): ${perKind.join("; ")}`);
  }
  return lines;
}
