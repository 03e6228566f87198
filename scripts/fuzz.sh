#!/usr/bin/env bash
# The bounded fuzz run of the test command (README, "Fuzzing the extractor"): installs
# cargo-fuzz when it is missing, writes the seed corpus, builds the cargo-fuzz target
# `extract` (fuzz/) with AddressSanitizer and runs it for $FUZZ_SECONDS (default 60).
#
# Usage: scripts/fuzz.sh <report.json>
#
# Writes the report scripts/summary.mjs reads: one check, failed when the target crashed
# (a panic, a sanitizer report, a write outside the root), hung past -timeout or outgrew
# -rss_limit_mb; the input that did it is kept under fuzz/artifacts/extract/. A run that
# cannot be built writes no report, which summary.mjs counts as a failure too.
#
# cargo-fuzz builds with -Zsanitizer=address, which stable rustc accepts with
# RUSTC_BOOTSTRAP=1; it is set for the two cargo-fuzz commands only. They build into
# fuzz/target, so their RUSTFLAGS never invalidate the addon's target/.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
report=${1:?usage: scripts/fuzz.sh <report.json>}
seconds=${FUZZ_SECONDS:-60}
cargo_fuzz_version=0.13.2
host=$(rustc -vV | sed -n 's/host: //p')
rm -f "$report"
mkdir -p "$(dirname "$report")"
log="${report%.json}.log"

step() { printf '\n==> %s\n' "$*"; }
elapsed() { echo $(($(date +%s) - $1)); }

if ! cargo fuzz --version >/dev/null 2>&1; then
  step "cargo install cargo-fuzz $cargo_fuzz_version"
  started=$(date +%s)
  cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked
  echo "installed cargo-fuzz in $(elapsed "$started") s"
fi

step "fuzz seeds (our packer, GNU tar, hostile archives)"
seeds="$repo/fuzz/seeds/extract"
rm -rf "$seeds"
PAPERCLIP_FUZZ_SEEDS="$seeds" cargo test -q -p paperclip-sync-core --target "$host" --lib \
  -- --ignored --exact tar::fuzz_seeds::write_fuzz_seeds
echo "$(find "$seeds" -type f | wc -l) seeds in fuzz/seeds/extract"

flags=(--sanitizer address --release --debug-assertions --target "$host" --target-dir "$repo/fuzz/target")
step "cargo fuzz build extract (AddressSanitizer)"
started=$(date +%s)
RUSTC_BOOTSTRAP=1 cargo fuzz build "${flags[@]}" extract
echo "built in $(elapsed "$started") s"

# Each input gets a fresh sandbox directory; tmpfs makes that about seven times faster.
parent=/dev/shm
[ -d "$parent" ] && [ -w "$parent" ] || parent=${TMPDIR:-/tmp}
sandboxes=$(mktemp -d "$parent/paperclip-fuzz.XXXXXX")
corpus="$repo/fuzz/corpus/extract"
mkdir -p "$corpus" "$repo/fuzz/artifacts/extract"
artifacts() { find "$repo/fuzz/artifacts/extract" -type f | sort; }
before=$(artifacts)
step "cargo fuzz run extract for ${seconds} s (log: $log)"
set +e
TMPDIR="$sandboxes" RUSTC_BOOTSTRAP=1 cargo fuzz run "${flags[@]}" extract "$corpus" "$seeds" -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -dict="$repo/fuzz/extract.dict" -print_final_stats=1 >"$log" 2>&1
status=$?
set -e
chmod -R u+rwX "$sandboxes" 2>/dev/null || true
rm -rf "$sandboxes"

runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
per_second=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
units=$(find "$corpus" -type f | wc -l)
artifact=$(comm -13 <(printf '%s\n' "$before") <(artifacts) | head -1)
grep -E '^#[0-9]+[[:space:]]+INITED|^Done ' "$log" || true
if [ $status -eq 0 ]; then
  echo "fuzz extract: ${runs:-?} runs in ${took:-?} s (${per_second:-?} exec/s, AddressSanitizer), corpus of $units inputs"
else
  tail -n 60 "$log"
  echo "fuzz extract FAILED (exit status $status) after ${runs:-?} runs${artifact:+; input: $artifact}"
  [ -z "$artifact" ] || echo "reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run extract $artifact"
fi
passed=false
[ $status -eq 0 ] && passed=true
printf '{"fuzz":{"target":"extract","sanitizer":"address","passed":%s,"status":%d,"runs":%s,"seconds":%s,"execPerSecond":%s,"corpus":%d,"artifact":"%s","log":"%s"}}\n' \
  "$passed" "$status" "${runs:-null}" "${took:-null}" "${per_second:-null}" "$units" "${artifact:-}" "$log" >"$report"
exit $status
