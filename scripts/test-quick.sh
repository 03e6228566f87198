#!/usr/bin/env bash
# `npm run test:quick`, the inner loop (CONTRIBUTING.md): the core crate's cargo tests without
# its C-heavy features (`git`: libgit2, `ssh`: libssh2 and OpenSSL), then the vitest files that
# need no sshd, none of upstream's suites and no long setup (other Node versions, npm installs,
# kill loops, thousands of generated repositories), closing with `N passed, N failed` as the
# full test command does (scripts/summary.mjs). Expects a built addon; builds nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
results=.test-results/quick
rm -rf "$results" && mkdir -p "$results"

# The vitest files: each area's behaviour and the fast differential tests. Left to `npm test`:
# ssh* (sshd), activation*, sandbox-* and packaging (upstream's orchestration, Node 24, npm
# installs), crash (kill loops), depth and tar-boundaries (very deep and very long paths),
# ignore.diff (200 generated repositories against git), tar.diff (the full GNU tar
# comparison; the core's cargo tests compare the packer with GNU tar too).
files=(
  cli-args error-codes platforms types transfer-deadline runtime-progress.diff
  exclude.diff snapshot.diff snapshot-watch merge.diff merge-lock mirror.diff
  ignore tar-extract tar-stream limits
)

# The longest single tests of those files and of the core, left to `npm test` too: the 64
# seeded merge triples, the 2 GB stream, the ignore scan's exact size bounds; extraction and
# walks past PATH_MAX, the GNU tar --exclude differential, the mutated-archive sweep and the
# names at every tar block boundary (each runs for tens of seconds in an unoptimized build).
slow_vitest='64 seeded triples|streams a 2 GB tree|accepts exactly 2 MiB of path bytes|accepts exactly 10 000 entries'
slow_cargo=(
  archives_deeper_than_path_max_are_extracted_whole trees_deeper_than_path_max_are_an_error_never_a_shallower_tree
  differential_against_gnu_tar mutated_archives_fail_safely names_and_targets_at_every_block_boundary
)

addon=$(ls native/*.node 2>/dev/null | head -1)
if [ -z "$addon" ]; then
  echo "test:quick: no built addon in native/; build first: bash -c 'source scripts/setup.sh'" >&2
  exit 1
fi
if [ -n "$(find src crates/core/src Cargo.toml crates/core/Cargo.toml -newer "$addon" -print -quit)" ]; then
  echo "test:quick: warning: Rust sources are newer than $addon; the vitest files test the old build (npm run --silent build:linux-x64-gnu)" >&2
fi

# A supported Node (>= 24.11), as the test command and the demo use: the `node` on PATH when it
# is one, else Node 24 from .cache/ (scripts/node-versions.sh).
source scripts/node-versions.sh
ensure_supported_node || exit 1

host=$(rustc -vV | sed -n 's/host: //p')
printf '\n==> cargo test -p paperclip-sync-core --no-default-features\n'
cargo test -p paperclip-sync-core --no-default-features --target "$host" -- "${slow_cargo[@]/#/--skip=}" 2>&1 |
  tee "$results/cargo-test.log"
cargo_status=${PIPESTATUS[0]}
echo "$cargo_status" > "$results/cargo-test.status"

paths=()
for file in "${files[@]}"; do paths+=("__test__/$file.test.js"); done
printf '\n==> vitest (%d files)\n' "${#paths[@]}"
node node_modules/vitest/vitest.mjs run "${paths[@]}" --testNamePattern="^(?!.*($slow_vitest))" --reporter=default --reporter=json \
  --outputFile.json="$results/vitest.json"
vitest_status=$?

printf '\n==> summary\n'
node scripts/summary.mjs "$results/cargo-test.log" "$results/vitest.json"
[ "$cargo_status" = 0 ] && [ "$vitest_status" = 0 ]
