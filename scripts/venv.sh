#!/usr/bin/env bash
# The virtual env of `make venv` (and so of `make test`): vcbus editable, with its dev dependencies.
#
#   scripts/venv.sh PYTHON VENV
#
# Installed with uv (a dev dependency too, itself installed by pip first), whose cache
# (${UV_CACHE_DIR:-~/.cache/uv}) keeps every wheel across runs and clones: a fresh clone's env
# takes seconds where pip took two minutes, since pip's cache keeps nothing from an index that
# says not to cache its answers. uv is given the system's certificates (--native-tls), as pip is.
# If uv cannot be had or fails, pip installs the same set (slower, same result).
# Reports its time on stderr.
set -euo pipefail
py="${1:?usage: $0 PYTHON VENV}"
venv="${2:?usage: $0 PYTHON VENV}"
start=$SECONDS
test -x "$venv/bin/python" || "$py" -m venv "$venv"
if "$venv/bin/python" -m pip install -q uv &&
    "$venv/bin/uv" pip install -q --native-tls --python "$venv/bin/python" -e '.[dev]'; then
  how=uv
else
  echo "venv: uv could not install the env; pip instead" >&2
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -e '.[dev]'
  how=pip
fi
echo "set-up: venv $((SECONDS - start)) s ($how)" >&2
