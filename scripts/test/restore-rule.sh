#!/usr/bin/env bash
# `npm run test:restore-rule [-- <workspaces>]`: the restore rule's generated tests with many
# more workspaces than `npm test` gives them (docs/differences.md, "Nothing the agent did not
# change"): __test__/restore-rule.test.js (the sandbox lane) and __test__/ssh-restore-rule.test.js
# (the SSH lane, against a real sshd). <workspaces> per lane, 60 by default; DIFF_SEED=<seed>
# replays a run. Expects a built addon (`npm test` or `npm run demo` builds one).
#
# The SSH suite logs in to sshd as the user running it, which may not be root: as root it runs
# as $SSH_TEST_USER (default pcnative, which `npm test` creates) from a copy of the repository
# that user owns, as scripts/test/full.sh runs the SSH suites.
set -euo pipefail
cd "$(dirname "$0")/../.."
count=${1:-60}
source scripts/setup/node-versions.sh
ensure_supported_node
export RESTORE_RULE_WORKSPACES=$count

printf '\n==> the sandbox lane, %s workspaces\n' "$count"
status=0
node node_modules/vitest/vitest.mjs run __test__/restore-rule.test.js || status=$?

printf '\n==> the SSH lane, %s workspaces\n' "$count"
if [ "$(id -u)" != 0 ]; then
  node node_modules/vitest/vitest.mjs run __test__/ssh-restore-rule.test.js || status=$?
  exit $status
fi
user=${SSH_TEST_USER:-pcnative}
if ! id "$user" >/dev/null 2>&1; then
  echo "test:restore-rule: the SSH lane needs an unprivileged user: $user does not exist (npm test creates it, or set SSH_TEST_USER)" >&2
  exit 1
fi
mkdir -p /run/sshd
copy=$(mktemp -d /tmp/pc-native-restore-rule.XXXXXX)
trap 'rm -rf "$copy"' EXIT
tar --exclude=./target --exclude=./.git --exclude=./.cache --exclude=./.test-results --exclude=./fuzz -cf - . | tar -xf - -C "$copy"
mkdir -p "$copy/.node/bin" && cp "$(command -v node)" "$copy/.node/bin/node"
chown -R "$user:" "$copy"
chmod 755 "$copy"
(cd "$copy" && runuser -u "$user" -- env PATH="$copy/.node/bin:$PATH" HOME="$(getent passwd "$user" | cut -d: -f6)" \
  RESTORE_RULE_WORKSPACES="$count" DIFF_SEED="${DIFF_SEED:-}" node node_modules/vitest/vitest.mjs run __test__/ssh-restore-rule.test.js) ||
  status=$?
exit $status
