#!/usr/bin/env bash
# Sourced by scripts/setup/addon.sh and scripts/setup/entry.sh: the npm dev dependencies (vitest, vite,
# @napi-rs/cli, oxlint, prettier, upstream as the oracle), installed with `npm ci` when
# node_modules is missing or older than package-lock.json.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  printf '\n==> npm ci\n' >&2
  npm ci --legacy-peer-deps --no-audit --no-fund >&2
fi
