#!/usr/bin/env bash
# Provide the envtest binaries (kube-apiserver + etcd, and kubectl) for the k8s tests.
#
#   scripts/envtest.sh            ensure the binaries exist; print their directory
#   scripts/envtest.sh --check    only look (never build); exit 1 if absent
#
# Resolution order:
#   1. $KUBEBUILDER_ASSETS, if it holds both kube-apiserver and etcd (e.g. from
#      `setup-envtest use <version> -p path`).
#   2. ${XDG_CACHE_HOME:-~/.cache}/vcbus/envtest/<k8s-version>/ (a cache: a
#      second run returns immediately).
#   3. Build both from Go modules into that cache directory (needs Go and the
#      Go module proxy; takes a long while on a small machine).
#
# Versions come from scripts/envtest-versions.env, the one place pinning them.
#
# k8s.io/kubernetes cannot be `go install`ed: its go.mod requires its staging
# modules (k8s.io/api, k8s.io/apiserver, ...) at v0.0.0 and replaces them with
# ./staging paths, and replace directives of a dependency are ignored. So we
# build from a throw-away wrapper module that requires k8s.io/kubernetes vX.Y.Z
# and replaces every module the kubernetes go.mod requires at v0.0.0 with its
# published v0.Y.Z tag. The replace list is generated from the go.mod that
# `go mod download -json` fetches, so bumping K8S_VERSION needs no other edit.
# etcd (go.etcd.io/etcd/server/v3) is built from a wrapper module the same way
# (its go.mod has replace directives, so `go install mod@v` refuses it too).
#
# stdout: the asset directory only (last line). Progress goes to stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=envtest-versions.env
source "$here/envtest-versions.env"
: "${K8S_VERSION:?K8S_VERSION missing in envtest-versions.env}"
: "${ETCD_VERSION:?ETCD_VERSION missing in envtest-versions.env}"

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/vcbus/envtest"
dest="$cache_root/$K8S_VERSION"
mode="${1:-ensure}"

log() { echo "envtest: $*" >&2; }

how_to_get() {
  cat >&2 <<EOF
envtest: no kube-apiserver/etcd binaries available.
  Either install Go (>= 1.24, with access to the Go module proxy) and run
      make envtest          # builds kube-apiserver $K8S_VERSION and etcd $ETCD_VERSION
                            # into $dest (one-off, many minutes)
  or point KUBEBUILDER_ASSETS at a directory holding 'kube-apiserver' and 'etcd',
  e.g. with controller-runtime's setup-envtest:
      go run sigs.k8s.io/controller-runtime/tools/setup-envtest@latest use $K8S_VERSION -p path
  Without them the tests marked 'k8s' are skipped (they fail if VCBUS_REQUIRE_K8S=1).
EOF
}

has_assets() { [[ -x "$1/kube-apiserver" && -x "$1/etcd" ]]; }

# A directory we built is complete only when its stamp matches the pins
# (the etcd version is not part of the directory name).
stamp_ok() {
  has_assets "$1" && [[ -f "$1/VERSIONS" ]] &&
    grep -qx "K8S_VERSION=$K8S_VERSION" "$1/VERSIONS" &&
    grep -qx "ETCD_VERSION=$ETCD_VERSION" "$1/VERSIONS"
}

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  if has_assets "$KUBEBUILDER_ASSETS"; then
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks kube-apiserver and/or etcd; ignoring it"
fi

# kubectl (same Kubernetes version) is built beside them: the tests compare what
# real kubectl prints with what vcbus reads. It has its own presence check, so a
# cache built before kubectl was added only builds kubectl.
kubectl_ok() { [[ -x "$1/kubectl" ]]; }

if stamp_ok "$dest" && { kubectl_ok "$dest" || [[ "$mode" == "--check" ]]; }; then
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
if stamp_ok "$dest" && kubectl_ok "$dest"; then   # somebody else finished while we waited
  echo "$dest"
  exit 0
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/vcbus-envtest.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# build_from_module <module> <version> <package> <output> [extra -ldflags]
build_from_module() {
  local mod="$1" ver="$2" pkg="$3" out="$4" extra_ldflags="${5:-}"
  local dir="$work/$(basename "$out")"
  mkdir -p "$dir"
  log "fetching $mod@$ver"
  local gomod
  gomod="$(go mod download -json "$mod@$ver" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
  [[ -f "$gomod" ]] || { log "could not download $mod@$ver"; return 1; }

  # Published tag of the staging modules: vX.Y.Z -> v0.Y.Z.
  local staging_ver="v0.${ver#v*.}"
  {
    echo "module vcbus.local/envtest-build"
    echo
    # Same language version and GODEBUG defaults as the upstream main module.
    grep -E '^(go|godebug) ' "$gomod" || true
    echo
    echo "require $mod $ver"
    echo
    echo "replace ("
    # Every requirement pinned at v0.0.0 (the staging modules) -> published tag.
    awk -v sv="$staging_ver" '
      $1 == "require" && $2 == "(" { inreq = 1; next }
      inreq && $1 == ")"           { inreq = 0; next }
      inreq && $2 == "v0.0.0"      { print "\t" $1 " => " $1 " " sv; next }
      !inreq && $1 == "require" && $3 == "v0.0.0" { print "\t" $2 " => " $2 " " sv }
    ' "$gomod"
    echo ")"
  } >"$dir/go.mod"
  local nrep
  nrep="$(grep -c ' => ' "$dir/go.mod" || true)"
  log "$mod: wrapper module with $nrep generated replace directives"

  (
    cd "$dir"
    export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
    go get "$pkg@$ver" >&2
    log "building $pkg (this takes a while)"
    local t0=$SECONDS
    nice -n 10 go build -trimpath -ldflags="-s -w $extra_ldflags" -o "$out.tmp" "$pkg" >&2
    mv -f "$out.tmp" "$out"
    log "built $(basename "$out") in $((SECONDS - t0))s"
  )
}

t_start=$SECONDS
k8s_minor="${K8S_VERSION#*.}"; k8s_minor="${k8s_minor%%.*}"
cv=k8s.io/component-base/version
version_flags="-X $cv.gitVersion=v$K8S_VERSION -X $cv.gitMajor=1 -X $cv.gitMinor=$k8s_minor -X $cv.gitTreeState=clean"

if ! kubectl_ok "$dest"; then
  build_from_module k8s.io/kubernetes "v$K8S_VERSION" \
    k8s.io/kubernetes/cmd/kubectl "$dest/kubectl" "$version_flags"
fi
if stamp_ok "$dest"; then
  log "done in $((SECONDS - t_start))s: $dest"
  echo "$dest"
  exit 0
fi
rm -f "$dest/VERSIONS"

build_from_module k8s.io/kubernetes "v$K8S_VERSION" \
  k8s.io/kubernetes/cmd/kube-apiserver "$dest/kube-apiserver" "$version_flags"

build_from_module go.etcd.io/etcd/server/v3 "v$ETCD_VERSION" \
  go.etcd.io/etcd/server/v3 "$dest/etcd"

{
  echo "K8S_VERSION=$K8S_VERSION"
  echo "ETCD_VERSION=$ETCD_VERSION"
  echo "GO_VERSION=$(go env GOVERSION)"
  echo "BUILD_SECONDS=$((SECONDS - t_start))"
} >"$dest/VERSIONS"
log "done in $((SECONDS - t_start))s: $dest"
echo "$dest"
