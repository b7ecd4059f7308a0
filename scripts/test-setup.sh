#!/usr/bin/env bash
# Everything `make test` needs beside the venv, set up side by side, each step's time reported.
#
#   scripts/test-setup.sh [MAKE]
#
# The steps are the Makefile's own targets (`make envtest`, `kwok`, `helm`, `js-example`,
# `browser`, `shells`: each never fails the build and says what the tests will miss), run at
# once in lanes: the three Go builds (kube-apiserver + etcd + kubectl, kwok, helm) and npm each
# in its own, and the two apt-get installs (chromium, then zsh and fish) in one, since apt-get
# takes one lock. On a machine where everything is cached each step returns at once; on a new
# one the builds overlap their downloads and links (each build is niced, so the rest of the
# machine keeps its share). Every lane's messages are printed when it ends, then one line of
# times:
#
#   set-up: envtest 0 s, kwok 0 s, helm 0 s, js-example 2 s, browser 0 s, shells 0 s; 2 s side by side
set -uo pipefail
make="${1:-make}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
logs="$(mktemp -d "${TMPDIR:-/tmp}/vcbus-setup.XXXXXX")"
trap 'rm -rf "$logs"' EXIT
start=$SECONDS

# lane TARGET...: the targets one after the other, in the background; each one's seconds in $logs/<target>.time
lane() {
  (
    for target in "$@"; do
      local t0=$SECONDS
      "$make" -s --no-print-directory "$target" >"$logs/$target.out" 2>&1
      echo "$((SECONDS - t0))" >"$logs/$target.time"
    done
  ) &
}

steps=(envtest kwok helm js-example browser shells)
lane envtest
lane kwok
lane helm
lane js-example
lane browser shells
wait

summary=()
for target in "${steps[@]}"; do
  [[ -s "$logs/$target.out" ]] && cat "$logs/$target.out" >&2
  summary+=("$target $(cat "$logs/$target.time" 2>/dev/null || echo '?') s")
done
joined="$(printf '%s, ' "${summary[@]}")"
echo "set-up: ${joined%, }; $((SECONDS - start)) s side by side" >&2
