#!/usr/bin/env bash
# Sourced by scripts/test/full.sh: which vitest files run how.
#
# Under Node 24 every file runs once. Most of them wait on child processes, npm, git, sshd
# and sockets, so they run $VITEST_WORKERS at a time; those that measure time or race
# processes on purpose (deadlines, stalls, aborts within a bound, lock schedules, kill
# points, file-system timestamps) run alone afterwards, one at a time: SERIAL_VITEST.
VITEST_WORKERS=${VITEST_WORKERS:-3}
SERIAL_VITEST=()
for file in faults-sandbox faults-ssh ignore merge-lock merge-lock-protocols sandbox-git-delta \
  sandbox-restore-delta snapshot-watch tar-extract tar-stream; do
  SERIAL_VITEST+=("__test__/$file.test.js")
done
# The SSH suites (as the unprivileged user when root) likewise: most wait on sshd, on
# $VITEST_WORKERS workers; those with keepalive and idle timers, session reuse, aborts in
# mid-transfer or bounds on a call's time alone, and the progress differential (upstream's
# lines for a short upload depend on how its pipe's reads fall, which load moves):
# SSH_SERIAL_VITEST.
SSH_SERIAL_VITEST=()
for file in ssh ssh-session-reuse ssh-warm ssh-runner ssh-workspace ssh-progress.diff; do
  SSH_SERIAL_VITEST+=("__test__/$file.test.js")
done

# Under Node 26 and the lowest supported Node: the files where the Node version matters, not
# the differential tests of the Rust code again. The activation (module hooks, require of ES
# modules, the vitest plugin), loading the binary and its errors, the CLI and its argument
# parser (node:util.parseArgs), doctor (a host's /proc record), the merge lock's protocols
# (node:sqlite), the tar stream (web streams); under Node 26 the release install too (npm
# and the installed package under that Node). Without their longest tests
# (scripts/test/quick-files.sh) and the CLI's demo run (demo.test.js runs the demo under Node 24).
NODE_VITEST=()
for file in activation activation-parts activation-vitest cli cli-args doctor error-codes merge-lock-protocols \
  tar-stream; do
  NODE_VITEST+=("__test__/$file.test.js")
done
FLOOR_VITEST=("${NODE_VITEST[@]}")
NODE_VITEST+=(__test__/release-install.test.js)
source scripts/test/quick-files.sh
NODE_VITEST_PATTERN="^(?!.*($QUICK_SLOW_VITEST|demo runs the cycle))"
