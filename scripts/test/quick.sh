#!/usr/bin/env bash
# `npm run test:quick`, the inner loop (CONTRIBUTING.md): the core crate's cargo tests without
# its C-heavy features (`git`: libgit2, `ssh`: libssh2 and OpenSSL), then the vitest files that
# need no sshd, none of upstream's suites and no long setup (other Node versions, npm installs,
# kill loops, thousands of generated repositories), closing with `N passed, N failed` as the
# full test command does (scripts/test/summary.mjs). Expects a built addon; builds nothing.
set -uo pipefail
cd "$(dirname "$0")/../.."
results=.test-results/quick
rm -rf "$results" && mkdir -p "$results"

# The vitest files and their longest single tests, left to `npm test`: scripts/test/quick-files.sh.
source scripts/test/quick-files.sh

# The longest single tests of the core, left to `npm test` too: extraction and walks past
# PATH_MAX, the GNU tar --exclude differential, the mutated-archive sweep and the names at
# every tar block boundary (each runs for tens of seconds in an unoptimized build).
slow_cargo=(
  archives_deeper_than_path_max_are_extracted_whole trees_deeper_than_path_max_are_an_error_never_a_shallower_tree
  differential_against_gnu_tar mutated_archives_fail_safely names_and_targets_at_every_block_boundary
)

# This machine's binary (native/ may also hold other platforms' builds, scripts/build/build.mjs).
platform=$(node --input-type=module -e 'import { currentPlatform } from "./lib/platforms.js"; console.log(currentPlatform())')
addon="native/adapter-utils-native.$platform.node"
if [ ! -f "$addon" ]; then
  echo "test:quick: no built addon in native/; build first: bash -c 'source scripts/setup/addon.sh'" >&2
  exit 1
fi
if [ -n "$(find src crates/core/src Cargo.toml crates/core/Cargo.toml -newer "$addon" -print -quit)" ]; then
  echo "test:quick: warning: Rust sources are newer than $addon; the vitest files test the old build (npm run --silent build:linux-x64-gnu)" >&2
fi

# A supported Node (>= 24.11), as the test command and the demo use: the `node` on PATH when it
# is one, else Node 24 from .cache/ (scripts/setup/node-versions.sh). `--floor` (`npm run test:quick
# -- --floor`): the lowest supported Node, $NODE24_FLOOR, fetched into .cache/ when missing.
source scripts/setup/node-versions.sh
if [ "${1:-}" = --floor ]; then
  use_node "$NODE24_FLOOR" || exit 1
elif [ -n "${1:-}" ]; then
  echo "test:quick: unknown argument $1 (the only one: --floor, the lowest supported Node)" >&2
  exit 2
else
  ensure_supported_node || exit 1
fi
printf '\n==> node %s\n' "$(node --version)"

host=$(rustc -vV | sed -n 's/host: //p')
printf '\n==> cargo test -p paperclip-sync-core --no-default-features\n'
cargo test -p paperclip-sync-core --no-default-features --target "$host" -- "${slow_cargo[@]/#/--skip=}" 2>&1 |
  tee "$results/cargo-test.log"
cargo_status=${PIPESTATUS[0]}
echo "$cargo_status" > "$results/cargo-test.status"

printf '\n==> vitest (%d files)\n' "${#QUICK_VITEST[@]}"
node node_modules/vitest/vitest.mjs run "${QUICK_VITEST[@]}" --testNamePattern="$QUICK_VITEST_PATTERN" --reporter=default --reporter=json \
  --outputFile.json="$results/vitest.json"
vitest_status=$?

printf '\n==> summary\n'
node scripts/test/summary.mjs "$results/cargo-test.log" "$results/vitest.json"
[ "$cargo_status" = 0 ] && [ "$vitest_status" = 0 ]
