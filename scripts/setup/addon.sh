#!/usr/bin/env bash
# Sourced by scripts/test/full.sh, scripts/harness/demo.sh, scripts/upstream/verify.sh and scripts/setup/entry.sh:
# installs the npm dependencies when they are missing or stale (scripts/setup/npm-deps.sh), and
# builds the addon (on linux-x64 against glibc 2.17 with the napi cross toolchain, checked;
# elsewhere a plain host build). Incremental after the first run.
set -euo pipefail

setup_step() { printf '\n==> %s\n' "$*" >&2; }

source scripts/setup/npm-deps.sh

host=$(rustc -vV | sed -n 's/host: //p')
if [ "$host" = x86_64-unknown-linux-gnu ]; then
  setup_step "build (x86_64-unknown-linux-gnu, glibc 2.17)"
  npm run --silent build:linux-x64-gnu >&2
  node scripts/build/check-glibc.mjs >&2
else
  setup_step "build ($host)"
  npm run --silent build >&2
fi
