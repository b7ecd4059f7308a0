#!/usr/bin/env bash
# Provide `helm` for the chart tests (tests/test_helm_chart.py), built from the Go module proxy.
#
#   scripts/install-helm.sh          ensure it exists; print its path (last line of stdout)
#   scripts/install-helm.sh --check  only look (never build); exit 1 if absent
#
# The version is pinned here (HELM_VERSION); the binary is cached in
# ${XDG_CACHE_HOME:-~/.cache}/vcbus/helm/<version>/helm, so a second run returns at once.
# It is built with `GOBIN=<cache> go install helm.sh/helm/v3/cmd/helm@<version>`
# (needs Go and the module proxy; a few minutes on a small machine). Never fails the
# build from `make helm`: without Go the chart tests skip with a message (or fail when
# VCBUS_REQUIRE_K8S=1, as CI sets).
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.19.5}"
dest="${XDG_CACHE_HOME:-$HOME/.cache}/vcbus/helm/$HELM_VERSION"
log() { echo "install-helm: $*" >&2; }

if [[ -x "$dest/helm" ]]; then
  echo "$dest/helm"
  exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
  log "no helm $HELM_VERSION in $dest (run scripts/install-helm.sh or make helm)"
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  log "no Go toolchain: cannot build helm $HELM_VERSION; the chart tests will skip"
  exit 1
fi
mkdir -p "$dest"
log "building helm $HELM_VERSION from the Go module proxy into $dest (one-off)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# As helm's Makefile does: the Kubernetes version `helm template` assumes is that of the client-go
# helm is built with (else v1.20, older than the chart's kubeVersion).
gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
k8s_minor="$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod" | head -1)"
: "${k8s_minor:?cannot read the client-go version of helm $HELM_VERSION}"
ldflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags="$ldflags -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$k8s_minor"
done
GOBIN="$tmp" CGO_ENABLED=0 go install -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
mv "$tmp/helm" "$dest/helm"
"$dest/helm" version --short >&2
echo "$dest/helm"
