#!/usr/bin/env bash
# Sourced by scripts/test/full.sh and scripts/harness/demo.sh: the Debian packages their steps need,
# installed with apt-get when a command is missing and we are root (otherwise the step that
# needs one says what is missing), and what sshd needs to start as root.

# `install_packages <package>…`: apt-get installs them, as root where apt-get exists;
# otherwise (or with no package named) nothing.
install_packages() {
  [ $# -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 0
  printf '\n==> apt-get install %s\n' "$*" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# `missing_ssh_packages`: prints the packages that bring sshd, ssh and ssh-keygen when any
# of them is missing (a throwaway sshd on 127.0.0.1 is what the SSH steps log in to).
missing_ssh_packages() {
  { [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1; } ||
    echo openssh-server openssh-client
}

# `prepare_sshd`: as root, sshd's privilege-separation directory, without which it refuses
# to start (a container where the package's service never ran has none).
prepare_sshd() {
  if [ "$(id -u)" = 0 ]; then mkdir -p /run/sshd; fi
}

# `ensure_ssh_packages`: the SSH steps' packages installed when missing (as root), and sshd's
# run directory (the demo command and bench/links.mjs).
ensure_ssh_packages() {
  local packages
  read -ra packages <<< "$(missing_ssh_packages)"
  install_packages "${packages[@]}"
  prepare_sshd
}
