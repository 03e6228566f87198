#!/usr/bin/env bash
# The lints of the test command (and of the pull-request workflow as written,
# .github/workflows/ci.yml, which has not run yet): `cargo fmt --check` (rustfmt.toml),
# `cargo clippy --all-targets -- -D warnings` on the workspace, `cargo fmt --check` on the
# fuzz crate (a workspace of its own), oxlint on the JavaScript
# (.oxlintrc.json; warnings fail too), prettier --check (.prettierrc.json: 120 columns), and that docs/benchmarks.md's tables and the README's
# Speed lines are what bench/results/ gives (bench/table.mjs --check: never edited by hand).
#
# Usage: scripts/test/lint.sh [report.json] — with a report, writes the one scripts/test/summary.mjs
# reads (one check per lint); exits non-zero when any lint fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
report=${1:-}
host=$(rustc -vV | sed -n 's/host: //p')
names=()
statuses=()

lint() {
  local name=$1
  shift
  printf '\n--> %s\n' "$name"
  "$@"
  local status=$?
  names+=("$name")
  statuses+=("$status")
  [ "$status" = 0 ] && echo "$name: clean" || echo "$name: FAILED (exit status $status)"
}

lint "cargo fmt --check" cargo fmt --all -- --check
lint "cargo clippy -D warnings" cargo clippy --workspace --all-targets --target "$host" --quiet -- -D warnings
lint "cargo fmt --check (fuzz)" bash -c 'cd fuzz && cargo fmt --all -- --check'
lint "oxlint" node node_modules/oxlint/bin/oxlint --deny-warnings
lint "prettier --check" node node_modules/prettier/bin/prettier.cjs --check --log-level warn .
lint "benchmark tables (docs/benchmarks.md and the README's Speed lines from bench/results)" node bench/table.mjs --check

failed=0
json='{"lint":['
for i in "${!names[@]}"; do
  [ "${statuses[$i]}" = 0 ] || failed=1
  [ "$i" -gt 0 ] && json+=','
  json+="{\"name\":\"${names[$i]}\",\"passed\":$([ "${statuses[$i]}" = 0 ] && echo true || echo false)}"
done
json+=']}'
[ -n "$report" ] && printf '%s\n' "$json" > "$report"
exit $failed
