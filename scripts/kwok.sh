#!/usr/bin/env bash
# Provide the KWOK controller (`kwok`, sigs.k8s.io/kwok) that plays the kubelets of fake nodes
# for the tests and benchmarks (tests/kwok_env.py starts it against the envtest kube-apiserver).
#
#   scripts/kwok.sh            ensure the binary exists; print its directory
#   scripts/kwok.sh --check    only look (never build); exit 1 if absent
#
# Resolution order:
#   1. $KWOK_BIN, if it is an executable file (e.g. a release binary of the same version).
#   2. ${XDG_CACHE_HOME:-~/.cache}/vcbus/kwok/<version>/kwok with a VERSIONS stamp matching the
#      pin (a cache: a second run returns immediately).
#   3. Build it into that cache with `GOBIN=<tmp> go install sigs.k8s.io/kwok/cmd/kwok@v<version>`
#      (kwok's go.mod has no replace directives, so `go install mod@version` works; needs Go and
#      the Go module proxy; a few minutes on a small machine with a cold build cache).
#
# The version comes from scripts/envtest-versions.env (KWOK_VERSION), the one place pinning the
# test binaries; it is the version Volcano's benchmark installs (benchmark/README.md).
#
# stdout: the directory holding `kwok` only (last line). Progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=envtest-versions.env
source "$here/envtest-versions.env"
: "${KWOK_VERSION:?KWOK_VERSION missing in envtest-versions.env}"

dest="${XDG_CACHE_HOME:-$HOME/.cache}/vcbus/kwok/$KWOK_VERSION"
mode="${1:-ensure}"

log() { echo "kwok: $*" >&2; }

how_to_get() {
  cat >&2 <<EOF
kwok: no kwok binary available.
  Either install Go (>= 1.24, with access to the Go module proxy) and run
      make kwok             # builds sigs.k8s.io/kwok/cmd/kwok v$KWOK_VERSION into $dest (one-off)
  or point KWOK_BIN at a kwok v$KWOK_VERSION binary (a release asset kwok-linux-amd64).
  Without it the tests that need KWOK are skipped (they fail if VCBUS_REQUIRE_K8S=1).
EOF
}

stamp_ok() {
  [[ -x "$1/kwok" && -f "$1/VERSIONS" ]] && grep -qx "KWOK_VERSION=$KWOK_VERSION" "$1/VERSIONS"
}

if [[ -n "${KWOK_BIN:-}" ]]; then
  if [[ -f "$KWOK_BIN" && -x "$KWOK_BIN" ]]; then
    dirname "$KWOK_BIN"
    exit 0
  fi
  log "KWOK_BIN=$KWOK_BIN is not an executable file; ignoring it"
fi

if stamp_ok "$dest"; then
  echo "$dest"
  exit 0
fi

if [[ "$mode" == "--check" ]]; then
  how_to_get
  exit 1
fi
if [[ "$mode" != "ensure" ]]; then
  echo "usage: $0 [--check]" >&2
  exit 2
fi

if ! command -v go >/dev/null 2>&1; then
  how_to_get
  exit 1
fi

mkdir -p "$dest"
# One builder at a time (e.g. `make test` in two shells).
exec 9>"$dest/.lock"
flock 9
if stamp_ok "$dest"; then   # somebody else finished while we waited
  echo "$dest"
  exit 0
fi
rm -f "$dest/VERSIONS"

work="$(mktemp -d "${TMPDIR:-/tmp}/vcbus-kwok.XXXXXX")"
trap 'rm -rf "$work"' EXIT

t_start=$SECONDS
log "building sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION into $dest (one-off)"
# As kwok's release build (hack/releases.sh) does, minus its image tags: static, stripped, and
# the version it reports (`kwok --version`) set explicitly.
GOBIN="$work" CGO_ENABLED=0 GOFLAGS="-buildvcs=false" nice -n 10 go install -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
  "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION" >&2
mv -f "$work/kwok" "$dest/kwok"
{
  echo "KWOK_VERSION=$KWOK_VERSION"
  echo "GO_VERSION=$(go env GOVERSION)"
  echo "BUILD_SECONDS=$((SECONDS - t_start))"
} >"$dest/VERSIONS"
log "built kwok in $((SECONDS - t_start))s: $dest"
echo "$dest"
