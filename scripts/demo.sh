#!/usr/bin/env bash
# The demo command (README): installs and builds what is missing, then runs the CLI's
# demo, which times the staging cycle natively next to upstream on a generated workspace.
# Runs on a supported Node (>= 24.11; scripts/node-versions.sh fetches Node 24 when needed).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node-versions.sh
ensure_supported_node
source scripts/setup.sh
exec node bin/paperclip-sync.mjs demo "$@"
