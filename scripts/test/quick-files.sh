#!/usr/bin/env bash
# Sourced by scripts/test/quick.sh (the quick loop) and scripts/test/full.sh (its run under the
# lowest supported Node): the quick loop's vitest files and the longest single tests of
# those files, left to the full run under Node 24.
#
# The vitest files: each area's behaviour (the lanes' shared lifecycle too) and the fast
# differential tests. Left to `npm test`:
# ssh* (sshd), activation*, sandbox-* and packaging (upstream's orchestration, Node 24, npm
# installs), crash (kill loops), depth and tar-boundaries (very deep and very long paths),
# ignore.diff (200 generated repositories against git), tar.diff (the full GNU tar
# comparison; the core's cargo tests compare the packer with GNU tar too).
QUICK_VITEST=()
for file in cli-args error-codes platforms types transfer-deadline runtime-progress.diff \
  exclude.diff snapshot.diff snapshot-watch merge.diff merge-lock merge-lock-protocols mirror.diff \
  ignore tar-extract tar-stream limits lifecycle; do
  QUICK_VITEST+=("__test__/$file.test.js")
done

# The longest single tests of those files: the 64 seeded merge triples, the 2 GB stream, the
# ignore scan's exact size bounds, the merge lock's random schedules of three protocols' processes.
# `--testNamePattern="$QUICK_VITEST_PATTERN"` skips them.
QUICK_SLOW_VITEST='64 seeded triples|streams a 2 GB tree|accepts exactly 2 MiB of path bytes|accepts exactly 10 000 entries|no overlap involving ours and no deadlock'
QUICK_VITEST_PATTERN="^(?!.*($QUICK_SLOW_VITEST))"
