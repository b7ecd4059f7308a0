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
#   3. Build it into that cache from the sigs.k8s.io/kwok module of the Go module proxy (`go mod
#      download`, then `go build ./cmd/kwok` in a copy; needs Go and the proxy; a few minutes on a
#      small machine with a cold build cache), with one change (KWOK_PATCH in envtest-versions.env names it).
#
# The one change: kwok's pod controller deletes a pod by name alone (DeleteOptions with a grace
# period of 0 and no precondition, pkg/kwok/controllers/pod_controller.go). A real kubelet deletes
# with the pod's uid as a precondition (pkg/kubelet/status/status_manager.go; kubernetes/kubernetes
# #25224, "so that kubelet won't delete pods with different uid but the same name"). Without it, a
# delete kwok queued for a pod that is already gone (it gets one per event of a terminating pod, and
# plays them seconds late under load) deletes the new pod a controller created under the same name:
# a vcjob restart's pods (same names, new uids) were deleted again, some twice, in the cluster
# benchmark's W3. The build adds the uid precondition, as the kubelet sends it.
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

: "${KWOK_PATCH:?KWOK_PATCH missing in envtest-versions.env}"

stamp_ok() {
  [[ -x "$1/kwok" && -f "$1/VERSIONS" ]] && grep -qx "KWOK_VERSION=$KWOK_VERSION" "$1/VERSIONS" \
    && grep -qx "KWOK_PATCH=$KWOK_PATCH" "$1/VERSIONS"
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
log "building sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION ($KWOK_PATCH) into $dest (one-off)"
src="$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@v$KWOK_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
[[ -d "$src" ]] || { log "go mod download of sigs.k8s.io/kwok@v$KWOK_VERSION gave no directory"; exit 1; }
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
ctl="$work/src/pkg/kwok/controllers/pod_controller.go"
call='c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, deleteOpt)'
grep -qF "$call" "$ctl" || { log "$ctl no longer has the delete this build changes ($call): review KWOK_PATCH"; exit 1; }
sed -i "s|$call|c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: deleteOpt.GracePeriodSeconds, Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})|" "$ctl"
# As kwok's release build (hack/releases.sh) does, minus its image tags: static, stripped, and
# the version it reports (`kwok --version`) set explicitly.
(cd "$work/src" && CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=mod" nice -n 10 go build -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" -o "$work/kwok" ./cmd/kwok) >&2
mv -f "$work/kwok" "$dest/kwok"
{
  echo "KWOK_VERSION=$KWOK_VERSION"
  echo "KWOK_PATCH=$KWOK_PATCH"
  echo "GO_VERSION=$(go env GOVERSION)"
  echo "BUILD_SECONDS=$((SECONDS - t_start))"
} >"$dest/VERSIONS"
log "built kwok in $((SECONDS - t_start))s: $dest"
echo "$dest"
