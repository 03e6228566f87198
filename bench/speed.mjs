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
 * What one machine kind's rows of a hot path say, by comparison: "" (upstream) → `9.1–45x`,
 * "vs `tar -cf - | cat`" or "vs a cold native capture" → its range, and "upstream fails on
 * corpus b (ERR_…)" → "" for a row whose upstream run failed.
 */
function kindFigures(rows) {
  const pairs = new Map();
  const add = (against, pair) => pairs.set(against, [...(pairs.get(against) ?? []), pair]);
  const failures = [];
  for (const r of rows) {
    if (r.upstream != null) add("", [r.upstream, r.ours]);
    else if (r.baselineMs != null) add(`vs ${r.baseline}`, [r.baselineMs, r.ours]);
    else if (r.floorTool && r.floor != null) add(`vs \`${r.floorIs}\``, [r.floor, r.ours]);
    if (r.upstream == null && r.upstreamFails)
      failures.push(`upstream fails${r.case ? ` on ${r.case}` : ""} (${r.upstreamFails})`);
  }
  return new Map([...[...pairs].map(([against, list]) => [against, range(list)]), ...failures.map((f) => [f, ""])]);
}

/** A machine kind as the README names it: its file system ("tmpfs", "disk") when only that tells the kinds apart. */
function kindLabels(results) {
  const split = results.map((r) => r.machine.kind.split(", corpora on "));
  const sameMachine = split.every((parts) => parts.length === 2 && parts[0] === split[0][0]);
  return results.map((r, i) => (sameMachine ? split[i][1].split(" (")[0] : r.machine.kind));
}

/**
 * The README lines for `results` (the saved results files, each `{ machine, rows, … }`):
 * `- [hot path][ref]: 28x on tmpfs, 14x on disk; vs \`tool\`: 1.0x on tmpfs, …`, then the
 * definition of `[ref]` (`link`, the benchmark page); no lines when no row has a figure.
 */
export function speedLines(results, link, ref = "bench") {
  const labels = kindLabels(results);
  const hotPaths = [...new Set(results.flatMap((r) => r.rows.map(hotPathOf)))];
  const lines = [];
  for (const hotPath of hotPaths) {
    const perKind = results.map((r) => kindFigures(r.rows.filter((row) => hotPathOf(row) === hotPath)));
    const comparisons = [...new Set(perKind.flatMap((figures) => [...figures.keys()]))];
    const segments = comparisons.map((against) => {
      const kinds = perKind.flatMap((figures, i) => (figures.has(against) ? [[figures.get(against), labels[i]]] : []));
      if (kinds.every(([figure]) => figure === ""))
        return `${against} on ${kinds.map(([, label]) => label).join(" and ")}`;
      return `${against ? `${against}: ` : ""}${kinds.map(([figure, label]) => `${figure} on ${label}`).join(", ")}`;
    });
    if (segments.length > 0) lines.push(`- [${hotPath}][${ref}]: ${segments.join("; ")}`);
  }
  return lines.length > 0 ? [...lines, "", `[${ref}]: ${link}`] : [];
}
