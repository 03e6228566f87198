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

# 2. npm dependencies (exact versions from package-lock.json).
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  step "npm ci"
  npm ci --legacy-peer-deps --no-audit --no-fund
fi

# 3. Build the addon. On linux-x64 the release build targets glibc 2.17 (napi cross
#    toolchain) and is checked for it; elsewhere a plain host build.
host=$(rustc -vV | sed -n 's/host: //p')
if [ "$host" = x86_64-unknown-linux-gnu ]; then
  step "build (x86_64-unknown-linux-gnu, glibc 2.17)"
  npm run --silent build:linux-x64-gnu
  node scripts/check-glibc.mjs
else
  step "build ($host)"
  npm run --silent build
fi

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
