// Generated blocks of the docs (a table a script writes between two marker lines, never edited
// by hand): bench/table.mjs and scripts/platforms/test.mjs.
import { readFileSync } from "node:fs";

/** `file`'s text and its text with the block between `start` and `end` replaced by `lines`. */
export function withBlock({ file, start, end, lines }) {
  const doc = readFileSync(file, "utf8");
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${file} has no ${start} … ${end} block`);
  return { file, doc, updated: doc.slice(0, from) + [start, ...lines, end].join("\n") + doc.slice(to + end.length) };
}

/** A markdown table of `rows` (objects) with `columns` as its header; `|` escaped in cells. */
export function markdownTable(columns, rows) {
  const cell = (value) => String(value).replaceAll("|", "\\|");
  return [
    `| ${columns.join(" | ")} |`,
    `|${columns.map(() => "---").join("|")}|`,
    ...rows.map((row) => `| ${columns.map((name) => cell(row[name])).join(" | ")} |`),
  ];
}
