#!/usr/bin/env bash
# The test command (README): installs what is missing, builds the addon, runs cargo test,
# our vitest suites and the upstream-swap runner, and closes with `N passed, N failed`
# for the JavaScript part (our suites plus the upstream tests that must pass swapped).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
results="$repo/.test-results"
rm -rf "$results" && mkdir -p "$results"

step() { printf '\n==> %s\n' "$*"; }

# 1. System tools the suites use (tar flavours for differential tests). Installed with apt
#    when missing and we are root; otherwise the suites that need them say so.
need=()
command -v bsdtar >/dev/null 2>&1 || need+=(libarchive-tools)
command -v busybox >/dev/null 2>&1 || need+=(busybox)
command -v objdump >/dev/null 2>&1 || need+=(binutils)
if [ ${#need[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  step "apt-get install ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# 2-3. npm dependencies and the addon build (shared with the demo command).
source scripts/setup.sh
host=$(rustc -vV | sed -n 's/host: //p')

# 4. Rust unit tests (shares napi's target dir through --target).
step "cargo test"
cargo test --workspace --target "$host"

# 5. Our vitest suites, then the upstream suites with our exports swapped in.
step "vitest"
set +e
node node_modules/vitest/vitest.mjs run --reporter=default --reporter=json --outputFile="$results/vitest.json"
vitest_status=$?
step "upstream-swap"
node scripts/upstream-swap.mjs --json "$results/upstream-swap.json"
swap_status=$?
set -e

node scripts/summary.mjs "$results/vitest.json" "$results/upstream-swap.json"
[ $vitest_status -eq 0 ] && [ $swap_status -eq 0 ]
