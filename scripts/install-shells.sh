#!/usr/bin/env bash
# Installs Debian's zsh and fish for the completion tests (tests/test_completion.py runs the
# scripts of `vcbus completion zsh|fish` in them) when they are missing: `apt-get install -y
# zsh fish`, with sudo only when not root (and only if sudo works without a password). Never
# fails: without apt or the rights to use it, it says so and those tests skip (or fail when
# VCBUS_REQUIRE_K8S=1, as .ci/run sets).
set -u
command -v zsh >/dev/null 2>&1 && command -v fish >/dev/null 2>&1 && exit 0
say() { echo "install-shells: $*; the zsh/fish completion tests will skip (fail if VCBUS_REQUIRE_K8S=1)" >&2; }
command -v apt-get >/dev/null 2>&1 || { say "no apt-get, cannot install zsh and fish"; exit 0; }
SUDO=
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
        say "not root and no password-less sudo, cannot install zsh and fish"; exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q zsh fish >/dev/null 2>&1; then
    $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q zsh fish >/dev/null 2>&1 \
        || { say "apt-get install zsh fish failed"; exit 0; }
fi
exit 0
