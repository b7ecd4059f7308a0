#!/usr/bin/env bash
# Build Volcano's own controller (vc-controller-manager) from Volcano's source, for
# `benchmarks/latency.py --volcano BIN` (vcbus against Volcano on the same API server).
#
#   VOLCANO_SRC=DIR [VOLCANO_APIS_SRC=DIR] [VOLCANO_VERSION=V] scripts/volcano-controller.sh
#       ensure the binary exists; print its path (last line of stdout)
#   ... scripts/volcano-controller.sh --check
#       only look (never build); exit 1 if absent
#
# VOLCANO_SRC       a checkout of github.com/volcano-sh/volcano (module volcano.sh/volcano)
# VOLCANO_APIS_SRC  a checkout of github.com/volcano-sh/apis (module volcano.sh/apis); needed only
#                   when VOLCANO_SRC does not carry it (recent Volcano has it under
#                   staging/src/volcano.sh/apis, with a replace directive to it in its go.mod).
#                   volcano.sh/* modules are not served by the Go module proxy, so they come from
#                   source; everything else comes from the proxy as the go.mod pins it.
# VOLCANO_VERSION   the cache key and the binary's --version; default `git describe` of
#                   VOLCANO_SRC, else a hash of its Go sources (and of VOLCANO_APIS_SRC).
#
# The source directories are only read: the build uses a copy of go.mod/go.sum (-modfile),
# edited there to replace volcano.sh/apis with VOLCANO_APIS_SRC when given.
# Cache: ${XDG_CACHE_HOME:-~/.cache}/vcbus/volcano/<version>/vc-controller-manager.
# Needs the Go that Volcano's go.mod asks for (Volcano 1.16 development: go 1.26.0); a build
# takes a few minutes on two cores (run under nice). Progress goes to stderr.
set -euo pipefail

mode="${1:-ensure}"
if [[ "$mode" != "ensure" && "$mode" != "--check" ]]; then
  echo "usage: VOLCANO_SRC=DIR [VOLCANO_APIS_SRC=DIR] [VOLCANO_VERSION=V] $0 [--check]" >&2
  exit 2
fi

log() { echo "volcano-controller: $*" >&2; }
die() { echo "volcano-controller: $*" >&2; exit 1; }

src="${VOLCANO_SRC:-}"
[[ -n "$src" ]] || die "VOLCANO_SRC is not set: point it at a checkout of github.com/volcano-sh/volcano"
[[ -d "$src" ]] || die "VOLCANO_SRC=$src: no such directory"
src="$(cd "$src" && pwd)"
[[ -f "$src/go.mod" ]] && grep -qx 'module volcano.sh/volcano' "$src/go.mod" ||
  die "VOLCANO_SRC=$src: no go.mod of module volcano.sh/volcano there"
[[ -d "$src/cmd/controller-manager" ]] || die "VOLCANO_SRC=$src: no cmd/controller-manager there"

apis="${VOLCANO_APIS_SRC:-}"
if [[ -n "$apis" ]]; then
  [[ -d "$apis" ]] || die "VOLCANO_APIS_SRC=$apis: no such directory"
  apis="$(cd "$apis" && pwd)"
  [[ -f "$apis/go.mod" ]] && grep -qx 'module volcano.sh/apis' "$apis/go.mod" ||
    die "VOLCANO_APIS_SRC=$apis: no go.mod of module volcano.sh/apis there"
else
  # Without VOLCANO_APIS_SRC the go.mod of VOLCANO_SRC must replace volcano.sh/apis with a directory it has.
  local_apis="$(sed -n 's#^[[:space:]]*\(replace[[:space:]]\+\)\{0,1\}volcano\.sh/apis[[:space:]]*=>[[:space:]]*\(\./[^[:space:]]*\)[[:space:]]*$#\2#p' "$src/go.mod" | head -n1)"
  [[ -n "$local_apis" && -f "$src/$local_apis/go.mod" ]] ||
    die "VOLCANO_SRC=$src does not carry volcano.sh/apis (no replace to a directory of its own): set VOLCANO_APIS_SRC to a checkout of github.com/volcano-sh/apis"
fi

# A git work tree of its own (not a directory inside some other repository).
own_git=false
[[ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null || true)" == "$src" ]] && own_git=true

version="${VOLCANO_VERSION:-}"
if [[ -z "$version" ]] && $own_git; then
  version="$(git -C "$src" describe --tags --always --dirty 2>/dev/null || true)"
fi
if [[ -z "$version" ]]; then
  hash_sources() {
    (cd "$1" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -not -path './.git/*' -print0 |
      LC_ALL=C sort -z | xargs -0 sha256sum)
  }
  version="src-$({ hash_sources "$src"; [[ -z "$apis" ]] || hash_sources "$apis"; } | sha256sum | cut -c1-12)"
fi
version="$(printf '%s' "$version" | tr -c 'A-Za-z0-9._+-' '_')"
[[ "$version" != .* ]] || version="_$version"  # never `.` or `..`: the cache directory stays below volcano/

dest="${XDG_CACHE_HOME:-$HOME/.cache}/vcbus/volcano/$version"
bin="$dest/vc-controller-manager"
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
if [[ "$mode" == "--check" ]]; then
  log "no vc-controller-manager $version in $dest (run without --check to build it)"
  exit 1
fi
command -v go >/dev/null 2>&1 || die "no Go on PATH: building vc-controller-manager needs Go (see Volcano's go.mod for the version)"

mkdir -p "$dest"
exec 9>"$dest/.lock"   # one builder at a time
flock 9
if [[ -x "$bin" ]]; then   # somebody else finished while we waited
  echo "$bin"
  exit 0
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/vcbus-volcano.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$src/go.mod" "$work/go.mod"
[[ ! -f "$src/go.sum" ]] || cp "$src/go.sum" "$work/go.sum"
if [[ -n "$apis" ]]; then
  go mod edit -replace="volcano.sh/apis=$apis" "$work/go.mod"
fi

pv=volcano.sh/volcano/pkg/version
ldflags="-s -w -X '$pv.Version=$version' -X '$pv.Built=$(date -u +%Y-%m-%dT%H:%M:%SZ)'"
if $own_git && sha="$(git -C "$src" rev-parse HEAD 2>/dev/null)"; then
  ldflags+=" -X '$pv.GitSHA=$sha'"
fi
log "building vc-controller-manager $version from $src${apis:+ with volcano.sh/apis from $apis} (a few minutes)"
t0=$SECONDS
if ! (cd "$src" && CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" \
      nice -n 10 go build -modfile="$work/go.mod" -trimpath -ldflags="$ldflags" \
      -o "$work/vc-controller-manager" ./cmd/controller-manager >&2); then
  die "go build of $src/cmd/controller-manager failed (above); Go here: $(go env GOVERSION), Volcano asks for: $(sed -n 's/^go //p' "$src/go.mod")"
fi
mv -f "$work/vc-controller-manager" "$bin"
log "built in $((SECONDS - t0))s: $bin"
echo "$bin"
