#!/usr/bin/env bash
# `npm run verify-upstream -- <version|path> [options]` (CONTRIBUTING.md, "Following a new
# upstream release"): installs and builds what is missing, as the test command does, then
# verifies that upstream against this package (scripts/upstream/verify.mjs; --help lists the
# options). Runs on a supported Node (>= 24.11; scripts/setup/node-versions.sh fetches Node 24 when
# needed).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup/node-versions.sh
ensure_supported_node
# Its usage (no argument, --help) needs no install or build.
if [ $# -eq 0 ] || [[ " $* " == *" --help "* ]] || [[ " $* " == *" -h "* ]]; then
  exec node scripts/upstream/verify.mjs "$@"
fi
source scripts/setup/addon.sh
exec node scripts/upstream/verify.mjs "$@"
