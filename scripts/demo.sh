#!/usr/bin/env bash
# The demo command (README): installs and builds what is missing, then runs the CLI's
# demo, which times the staging cycle natively next to upstream on a generated workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
exec node bin/paperclip-sync.mjs demo "$@"
