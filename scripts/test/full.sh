#!/usr/bin/env bash
# The test command (README): installs what is missing, builds the addon, runs cargo test, the lints (scripts/test/lint.sh),
# bounded fuzz runs of the tar extractor and packer (scripts/test/fuzz.sh), our vitest suites, the
# activation suite runs (upstream's and two consumers' suites with our exports), and the
# vitest files where the Node version matters under Node 26 and the lowest supported Node;
# closes with each step's minutes and `N passed, N failed` (scripts/test/summary.mjs).
#
# The SSH suites (ours, __test__/ssh*.test.js, and upstream's ssh-fixture in the activation
# suites) start a real sshd on 127.0.0.1 and log in to it as the current user. sshd and
# upstream's fixture refuse root logins, so as root they run as an unprivileged user
# ($SSH_TEST_USER, created when missing) from a copy of the repository that user owns; their
# results are folded into the closing line. A suite that skips instead of transferring counts
# as failed. The SSH fault suite (__test__/faults-ssh.test.js) needs root for its network
# namespace: it runs in the root vitest pass (step 5), starts sshd as root and logs in as
# $SSH_TEST_USER.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
results="$repo/.test-results"
started=$(date +%s)
rm -rf "$results" && mkdir -p "$results"

# Each step's header says how far into the run it starts (where the time goes, in CI's log);
# $results/steps.tsv keeps each step's start, and the closing summary prints its minutes.
step() {
  local at=$(($(date +%s) - started))
  printf '%s\t%s\n' "$at" "$*" >> "$results/steps.tsv"
  printf '\n==> %s (at %d s)\n' "$*" "$at"
}
# `record <report> <status>`: a step's exit status, written beside its report
# ($results/<report>.status). scripts/test/summary.mjs counts a status other than 0 whose report
# shows no failure as one failure, named (with the error lines of the step's output, kept as
# $results/<report>.out for the vitest runs), so the closing line agrees with this script's
# own exit status, which is 1 when any recorded status is not 0.
record() { echo "$2" > "$results/$1.status"; }

# 1. System tools the suites use (tar flavours for differential tests, sshd, a C++ compiler
#    for the fuzz run's libFuzzer). Installed with apt when missing and we are root
#    (scripts/setup/system-packages.sh, shared with the demo command); otherwise the suites that
#    need them say so.
source scripts/setup/system-packages.sh
need=()
command -v bsdtar >/dev/null 2>&1 || need+=(libarchive-tools)
command -v busybox >/dev/null 2>&1 || need+=(busybox)
command -v objdump >/dev/null 2>&1 || need+=(binutils)
read -ra ssh_packages <<< "$(missing_ssh_packages)"
need+=("${ssh_packages[@]}")
command -v c++ >/dev/null 2>&1 || need+=(g++) # libfuzzer-sys compiles libFuzzer (C++) for the fuzz run
install_packages "${need[@]}"

ssh_user=${SSH_TEST_USER:-pcnative}
as_root=false
if [ "$(id -u)" = 0 ]; then
  as_root=true
  prepare_sshd
  if ! id "$ssh_user" >/dev/null 2>&1; then
    step "useradd $ssh_user (the SSH suites' unprivileged user)"
    useradd --create-home --shell /bin/sh "$ssh_user"
  fi
  # sshd running as root (the SSH fault suite's, in a network namespace) refuses a locked
  # account ('!' in its password field, as useradd leaves it): no password, not locked.
  if [ "$(getent shadow "$ssh_user" | cut -d: -f2 | cut -c1)" = '!' ]; then
    usermod -p '*' "$ssh_user"
  fi
fi

# 2-3. Node 24 for the whole run (scripts/setup/node-versions.sh; Node 26 and the lowest supported
#      Node for two more passes below),
#      then the npm dependencies and the addon build (shared with the demo command).
source scripts/setup/node-versions.sh
# The vitest files, by how they run: scripts/test/full-files.sh.
source scripts/test/full-files.sh
if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
  node26_bin=$(node_dir "$NODE26_VERSION")
  floor_bin=$(node_dir "$NODE24_FLOOR")
  use_node "$NODE24_VERSION"
fi
step "setup (node $(node --version), npm ci, build)"
source scripts/setup/addon.sh
host=$(rustc -vV | sed -n 's/host: //p')

# Every step runs under a deadline (`bounded <seconds> <command>…`): its own budget, cut to
# what is left of the whole run's ($TEST_BUDGET_SECONDS from the start, 5100 s by default,
# under CI's 5400 s) minus a minute for the closing line. A step that hangs is killed and
# counted as failed instead of running into CI's limit with no closing line.
deadline=$((started + ${TEST_BUDGET_SECONDS:-5100}))
bounded() {
  local seconds=$1
  shift
  local left=$((deadline - $(date +%s) - 60))
  [ "$left" -lt "$seconds" ] && seconds=$left
  [ "$seconds" -lt 1 ] && seconds=1
  timeout --kill-after=30 "$seconds" "$@"
}

# The activation suite runs (scripts/upstream/activation-suites.mjs): every compiled suite of upstream
# and of two real consumers, activated, each against the unactivated run with the same module
# loading (its baseline, from the record in test-baselines/ where its key matches, else run
# live; ACTIVATION_BASELINES=record writes this run's baselines back to the record,
# ACTIVATION_BASELINES=live runs them all live). Each mechanism runs where it is tested best,
# so that every mode runs somewhere once: upstream's own suites through NODE_OPTIONS=
# --import …/register (the operator's recipe, inherited by every worker and child process)
# and through the vitest plugin inlined (its `node:fs` mocks reach our drop-ins);
# claude-local's through the plugin externalized (a config holding only the plugin; its setup
# file installs the Node hook in each worker: a consumer reaches upstream only through its own
# imports) and inlined; codex-local's (the slowest externalized) inlined.
activation_modes() {
  if [ -n "${ACTIVATION_MODES:-}" ]; then echo "$ACTIVATION_MODES"
  elif [ "$1" = adapter-utils ]; then echo hook,plugin-inline
  elif [ "$1" = adapter-codex-local ]; then echo plugin-inline
  else echo plugin-external,plugin-inline
  fi
}

# Waits for the activation runs in `pids` (one per package, in this order), records each
# one's exit status and prints its log.
activation_wait() {
  local pkg status
  for pkg in adapter-utils adapter-claude-local adapter-codex-local; do
    status=0
    wait "${pids[0]}" || status=$?
    pids=("${pids[@]:1}")
    record "activation-$pkg" "$status"
    cat "$results/activation-$pkg.log"
  done
}

activation_baselines=()
case "${ACTIVATION_BASELINES:-recorded}" in
  recorded) ;;
  record) activation_baselines=(--record) ;;
  live) activation_baselines=(--baselines live) ;;
  *) echo "ACTIVATION_BASELINES is recorded, record or live, not $ACTIVATION_BASELINES" >&2; exit 2 ;;
esac

# `vitest_step <report> <seconds> <vitest arguments>…`: one vitest run under its deadline,
# its JSON report and output kept under $results, its exit status recorded.
vitest_step() {
  local report=$1 seconds=$2
  shift 2
  bounded "$seconds" node node_modules/vitest/vitest.mjs run "$@" --reporter=default --reporter=json \
      --outputFile.json="$results/$report.json" 2>&1 | tee "$results/$report.out"
  record "$report" "${PIPESTATUS[0]}"
}

# 4. The activation suites start first and run in the background while the steps up to our
#    timing-insensitive vitest files run: their suites mostly wait on timers and child
#    processes (well under one core), the steps before them mostly compile. The three packages
#    at once, each printing to its own log, shown when all are done; their re-runs of
#    differing suite files wait until all three first passes are done
#    (ACTIVATION_SUITES_BARRIER). As root they run as $ssh_user from a copy of the repository
#    (without the build cache and git metadata) that the user owns, which the SSH suites use
#    too; both load the plugin and the hook from the release tarballs installed as an
#    operator would (scripts/release/install.mjs).
set +e
if $as_root; then
  step "activation suites as $ssh_user: started in the background (copy, release install)"
  copy=$(mktemp -d /tmp/pc-native-ssh.XXXXXX)
  tar -C "$repo" --exclude=./target --exclude=./.git --exclude=./.swap --exclude=./.verify-upstream --exclude=./.cache \
      --exclude=./.test-results --exclude=./.bench --exclude=./fuzz -cf - . | tar -xf - -C "$copy"
  # This run's Node, inside the copy (the repository's .cache may not be readable by the user).
  mkdir -p "$copy/.node/bin" && cp "$(command -v node)" "$copy/.node/bin/node"
  (cd "$copy" && node scripts/release/install.mjs --dir "$copy/.release" --no-build >/dev/null)
  chown -R "$ssh_user:" "$copy"
  chmod 755 "$copy"
  as_user=(runuser -u "$ssh_user" -- env PATH="$copy/.node/bin:$PATH" HOME="$(getent passwd "$ssh_user" | cut -d: -f6)")
  # Where the runs start and write their reports (the user cannot write to $results).
  activation_dir=$copy
  activation_out=$copy
  native="$copy/.release/project/node_modules/@paperclipai/adapter-utils-native"
else
  step "activation suites: started in the background (release install)"
  node scripts/release/install.mjs --dir "$results/release" --no-build >/dev/null
  as_user=()
  activation_dir=$repo
  activation_out=$results
  native="$results/release/project/node_modules/@paperclipai/adapter-utils-native"
fi
activation_started=$(date +%s)
pids=()
for pkg in adapter-utils adapter-claude-local adapter-codex-local; do
  (cd "$activation_dir" && ACTIVATION_SUITES_BARRIER="$activation_out/.activation-barrier:3" bounded 2400 "${as_user[@]}" \
      node scripts/upstream/activation-suites.mjs --package "@paperclipai/$pkg" --native "$native" \
      --modes "$(activation_modes "$pkg")" "${activation_baselines[@]}" --json "$activation_out/activation-$pkg.json") \
      > "$results/activation-$pkg.log" 2>&1 &
  pids+=($!)
done
set -e

# 5. Rust unit tests (shares napi's target dir through --target). Their `test result:`
#    lines are counted in the closing line (scripts/test/summary.mjs reads the log).
step "cargo test"
set +e
bounded 1200 cargo test --workspace --target "$host" 2>&1 | tee "$results/cargo-test.log"
record cargo-test "${PIPESTATUS[0]}"
set -e

# 5a. The lints (scripts/test/lint.sh: rustfmt, clippy, the JS linter), one check each.
step "lint"
status=0
bounded 900 bash scripts/test/lint.sh "$results/lint.json" || status=$?
record lint $status

# 5b. The cargo-fuzz target `extract` for $FUZZ_SECONDS (60 s by default); cargo-fuzz is
#     installed when missing. A crash fails the run but not this script yet: it is counted.
step "fuzz (tar extractor, ${FUZZ_SECONDS:-60} s)"
status=0
bounded 1200 bash scripts/test/fuzz.sh "$results/fuzz-extract.json" || status=$?
record fuzz-extract $status
# 5c. The cargo-fuzz target `pack` (packed random trees against our extractor and GNU tar)
#     for $FUZZ_PACK_SECONDS (30 s by default), counted as its own check.
step "fuzz (tar packer, ${FUZZ_PACK_SECONDS:-30} s)"
status=0
bounded 900 bash scripts/test/fuzz.sh "$results/fuzz-pack.json" pack || status=$?
record fuzz-pack $status

# 6. Our vitest suites (scripts/test/full-files.sh): the files that mostly wait (on child
#    processes, npm, git, sockets) on $VITEST_WORKERS workers at once, beside the activation
#    suites; then, once those are done, the timing-sensitive ones alone, one at a time, and
#    the SSH suites (as $ssh_user when root; the SSH fault suite needs root and runs with the
#    timing-sensitive files). Upstream's suites with our exports run in the activation step.
set +e
step "vitest ($VITEST_WORKERS workers; the activation suites in the background)"
vitest_step vitest 1200 --exclude '__test__/ssh*.test.js' "${SERIAL_VITEST[@]/#/--exclude=}" \
    --maxWorkers="$VITEST_WORKERS" --minWorkers=1

step "activation suites: the rest of the background runs"
activation_wait
ran=$(($(date +%s) - activation_started))
printf '# the activation suites ran in the background for %d.%d minutes, from %d s into the run\n' \
  "$((ran / 60))" "$((ran % 60 * 10 / 60))" "$((activation_started - started))" >> "$results/steps.tsv"
if [ "$activation_out" != "$results" ]; then
  for pkg in adapter-utils adapter-claude-local adapter-codex-local; do
    cp "$activation_out/activation-$pkg.json" "$results/activation-$pkg.json" 2>/dev/null
  done
  # ACTIVATION_BASELINES=record: the baselines the runs wrote, back into this checkout.
  [ -n "${activation_baselines[*]}" ] && cp "$activation_dir"/test-baselines/*.json "$repo/test-baselines/"
fi

step "vitest (timing-sensitive files, one at a time)"
vitest_step vitest-serial 900 "${SERIAL_VITEST[@]}" --no-file-parallelism

# `ssh_step <report> <vitest arguments>…`: a vitest run of SSH suites, as $ssh_user from the
# copy when root.
ssh_step() {
  local report=$1
  shift
  if $as_root; then
    (cd "$copy" && bounded 900 "${as_user[@]}" node node_modules/vitest/vitest.mjs run "$@" \
        --reporter=default --reporter=json --outputFile.json="$copy/$report.json") 2>&1 | tee "$results/$report.out"
    record "$report" "${PIPESTATUS[0]}"
    cp "$copy/$report.json" "$results/$report.json" 2>/dev/null
  else
    vitest_step "$report" 900 "$@"
  fi
}
ssh_as=""
$as_root && ssh_as=" as $ssh_user"
step "SSH suites$ssh_as ($VITEST_WORKERS workers)"
ssh_step ssh-vitest __test__/ssh "${SSH_SERIAL_VITEST[@]/#/--exclude=}" --maxWorkers="$VITEST_WORKERS" --minWorkers=1
step "SSH suites$ssh_as with timers, one at a time"
ssh_step ssh-vitest-serial "${SSH_SERIAL_VITEST[@]}" --no-file-parallelism
if $as_root; then rm -rf "$copy"; fi

# 7-8. The other supported Nodes, Node 26 and the lowest supported ($NODE24_FLOOR, package.json's
#      `engines`): the vitest files where the Node version matters (scripts/test/full-files.sh:
#      module hooks and require of ES modules in the activation, loading the binary, the
#      release install, the CLI and doctor, node:sqlite in the merge lock, web streams),
#      without their longest tests. The differential tests of the Rust code run once, above.
if [ -n "${node26_bin:-}" ]; then
  step "vitest under Node $("$node26_bin/node" --version)"
  PATH="$node26_bin:$PATH" vitest_step vitest-node26 900 "${NODE_VITEST[@]}" --testNamePattern="$NODE_VITEST_PATTERN"
fi
if [ -n "${floor_bin:-}" ]; then
  step "vitest under Node $("$floor_bin/node" --version) (the lowest supported)"
  PATH="$floor_bin:$PATH" vitest_step vitest-node-floor 900 "${FLOOR_VITEST[@]}" --testNamePattern="$NODE_VITEST_PATTERN"
fi
set -e

reports=("$results/cargo-test.log" "$results/lint.json" "$results/vitest.json" "$results/vitest-serial.json")
[ -n "${node26_bin:-}" ] && reports+=("$results/vitest-node26.json")
[ -n "${floor_bin:-}" ] && reports+=("$results/vitest-node-floor.json")
reports+=("$results/ssh-vitest.json" "$results/ssh-vitest-serial.json")
reports+=("$results/activation-adapter-utils.json" "$results/activation-adapter-claude-local.json" "$results/activation-adapter-codex-local.json")
reports+=("$results/fuzz-extract.json" "$results/fuzz-pack.json")
step "summary"
node scripts/test/summary.mjs --steps "$results/steps.tsv" "${reports[@]}"
! grep -qvx 0 "$results"/*.status
