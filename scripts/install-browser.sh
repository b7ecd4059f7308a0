#!/usr/bin/env bash
# Installs Debian's `chromium` for the browser tests (tests/test_replay_html_browser.py)
# when /usr/bin/chromium is missing: `apt-get install -y chromium`, with sudo only when
# not root (and only if sudo works without a password). Never fails: without apt or
# the rights to use it, it says so and the browser tests skip (or fail when
# VCBUS_REQUIRE_BROWSER=1 / VCBUS_REQUIRE_K8S=1, as .ci/run sets).
set -u
test -x /usr/bin/chromium && exit 0
say() { echo "install-browser: $*; the browser tests will skip (fail if VCBUS_REQUIRE_BROWSER=1)" >&2; }
command -v apt-get >/dev/null 2>&1 || { say "no apt-get, cannot install chromium"; exit 0; }
SUDO=
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
        say "not root and no password-less sudo, cannot install chromium"; exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q chromium >/dev/null 2>&1; then
    # a fresh machine (a container) may have no package lists yet
    $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q chromium >/dev/null 2>&1 \
        || { say "apt-get install chromium failed"; exit 0; }
fi
test -x /usr/bin/chromium || say "chromium installed but /usr/bin/chromium is missing"
exit 0
