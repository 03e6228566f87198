#!/usr/bin/env bash
# A bounded fuzz run of the test command (docs/fuzzing.md): installs
# cargo-fuzz when it is missing, builds a cargo-fuzz target (fuzz/) with AddressSanitizer
# and runs it. Targets: `extract` (the default; seeded with the corpus the core crate's
# `tar::fuzz_seeds` test writes) for $FUZZ_SECONDS (default 60), and `pack` (random trees
# packed, then extracted by us and GNU tar) for $FUZZ_PACK_SECONDS (default 30).
#
# Usage: scripts/test/fuzz.sh <report.json> [extract|pack]
#
# Writes the report scripts/test/summary.mjs reads: one check, failed when the target crashed
# (a panic, a sanitizer report, a write outside the root, a tree not reproduced), hung past
# -timeout or outgrew -rss_limit_mb; the input that did it is kept under
# fuzz/artifacts/<target>/. A run that cannot be built writes no report, which summary.mjs
# counts as a failure too.
#
# cargo-fuzz builds with -Zsanitizer=address, which stable rustc accepts with
# RUSTC_BOOTSTRAP=1; it is set for the two cargo-fuzz commands only. They build into
# fuzz/target, so their RUSTFLAGS never invalidate the addon's target/.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
report=${1:?usage: scripts/test/fuzz.sh <report.json> [extract|pack]}
target=${2:-extract}
case "$target" in
  extract) seconds=${FUZZ_SECONDS:-60} ;;
  pack) seconds=${FUZZ_PACK_SECONDS:-30} ;;
  *) echo "unknown fuzz target: $target" >&2; exit 2 ;;
esac
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

# Inputs and libFuzzer options of each target. `pack` starts from an empty corpus (its
# input is a tree recipe, see fuzz/fuzz_targets/pack.rs) and needs no long inputs.
inputs=("$repo/fuzz/corpus/$target")
options=(-max_len=65536)
if [ "$target" = extract ]; then
  step "fuzz seeds (our packer, GNU tar, hostile archives)"
  seeds="$repo/fuzz/seeds/extract"
  rm -rf "$seeds"
  PAPERCLIP_FUZZ_SEEDS="$seeds" cargo test -q -p paperclip-sync-core --target "$host" --lib \
    -- --ignored --exact tar::fuzz_seeds::write_fuzz_seeds
  echo "$(find "$seeds" -type f | wc -l) seeds in fuzz/seeds/extract"
  inputs+=("$seeds")
  options+=(-dict="$repo/fuzz/extract.dict")
else
  options=(-max_len=8192)
fi

flags=(--sanitizer address --release --debug-assertions --target "$host" --target-dir "$repo/fuzz/target")
step "cargo fuzz build $target (AddressSanitizer)"
started=$(date +%s)
RUSTC_BOOTSTRAP=1 cargo fuzz build "${flags[@]}" "$target"
echo "built in $(elapsed "$started") s"

# Each input gets a fresh sandbox directory; tmpfs makes that about seven times faster.
parent=/dev/shm
[ -d "$parent" ] && [ -w "$parent" ] || parent=${TMPDIR:-/tmp}
sandboxes=$(mktemp -d "$parent/paperclip-fuzz.XXXXXX")
corpus="$repo/fuzz/corpus/$target"
mkdir -p "$corpus" "$repo/fuzz/artifacts/$target"
artifacts() { find "$repo/fuzz/artifacts/$target" -type f | sort; }
before=$(artifacts)
step "cargo fuzz run $target for ${seconds} s (log: $log)"
set +e
TMPDIR="$sandboxes" RUSTC_BOOTSTRAP=1 cargo fuzz run "${flags[@]}" "$target" "${inputs[@]}" -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 "${options[@]}" \
  -print_final_stats=1 >"$log" 2>&1
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
  echo "fuzz $target: ${runs:-?} runs in ${took:-?} s (${per_second:-?} exec/s, AddressSanitizer), corpus of $units inputs"
else
  tail -n 60 "$log"
  echo "fuzz $target FAILED (exit status $status) after ${runs:-?} runs${artifact:+; input: $artifact}"
  [ -z "$artifact" ] || echo "reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run $target $artifact"
fi
passed=false
[ $status -eq 0 ] && passed=true
printf '{"fuzz":{"target":"%s","sanitizer":"address","passed":%s,"status":%d,"runs":%s,"seconds":%s,"execPerSecond":%s,"corpus":%d,"artifact":"%s","log":"%s"}}\n' \
  "$target" "$passed" "$status" "${runs:-null}" "${took:-null}" "${per_second:-null}" "$units" "${artifact:-}" "$log" >"$report"
exit $status
