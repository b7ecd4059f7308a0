#!/usr/bin/env bash
# Installs the npm dependency (`nats`, pinned by package-lock.json) of the JavaScript
# subscriber example, examples/subscribers/js, for tests/test_subscriber_js.py.
# Never fails: without node/npm, or when the npm registry is unreachable, it says so
# and that test skips (or fails when VCBUS_REQUIRE_K8S=1 / VCBUS_REQUIRE_NODE=1, as
# .ci/run sets the former).
set -u
DIR="$(cd "$(dirname "$0")/.." && pwd)/examples/subscribers/js"
test -f "$DIR/node_modules/nats/package.json" && exit 0
say() { echo "install-js-example: $*; the JavaScript subscriber test will skip (fail if VCBUS_REQUIRE_K8S=1)" >&2; }
command -v node >/dev/null 2>&1 || { say "no node on PATH"; exit 0; }
command -v npm >/dev/null 2>&1 || { say "no npm on PATH"; exit 0; }
(cd "$DIR" && timeout 300 npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1) \
    || say "npm ci in $DIR failed (registry unreachable?)"
exit 0
