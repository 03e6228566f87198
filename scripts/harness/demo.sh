#!/usr/bin/env bash
# The demo command (README): installs and builds what is missing, then runs the CLI's
# demo, which times the staging cycle natively next to upstream on a generated workspace.
# Runs on a supported Node (>= 24.11; scripts/setup/node-versions.sh fetches Node 24 when needed).
# Its SSH step logs in to a throwaway sshd: as root, openssh-server and openssh-client are
# installed with apt when missing (scripts/setup/system-packages.sh, as the test command does).
set -euo pipefail
cd "$(dirname "$0")/../.."
# `--help` needs neither the packages nor the build: the CLI prints it with no binary.
for arg in "$@"; do
  if [ "$arg" = --help ] || [ "$arg" = -h ]; then
    source scripts/setup/node-versions.sh
    ensure_supported_node
    exec node bin/paperclip-sync.mjs demo --help
  fi
done
source scripts/setup/system-packages.sh
if [[ " $* " != *" --no-ssh "* ]]; then
  ensure_ssh_packages
fi
source scripts/setup/node-versions.sh
ensure_supported_node
source scripts/setup/addon.sh
exec node bin/paperclip-sync.mjs demo "$@"
