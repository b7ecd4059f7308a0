# vcbus developer entry points. `make test` works on a fresh machine: it creates
# the virtual env, installs everything, builds/fetches the test binaries and runs
# the whole suite (layering contracts included).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv setup test test-fast lint run bench envtest kwok browser js-example helm shells docs docs-images clean crds lock

# scripts/venv.sh: uv with its cache (seconds on a fresh clone), pip if uv cannot; says its time.
$(STAMP): pyproject.toml
	@scripts/venv.sh $(PY) $(VENV)
	touch $(STAMP)

venv: $(STAMP)

# deploy/crds/*.yaml and statemachines/admission/crd_schemas.json from deploy/crds/src/
# (scripts/gen-crds.py; tests/test_crdgen.py fails when they are not current).
crds: $(STAMP)
	$(BIN)/python scripts/gen-crds.py

# requirements.lock (the image's exact, hashed dependencies) from pyproject.toml, and requirements-build.lock
# (its build stage's setuptools), with uv (a dev dependency).
lock: $(STAMP)
	{ sed -n '1,4p' requirements.lock; $(BIN)/uv pip compile pyproject.toml --generate-hashes --python-version 3.11 \
	  --python-platform linux --no-header --quiet; } > requirements.lock.new && mv requirements.lock.new requirements.lock
	{ sed -n '1,2p' requirements-build.lock; echo "setuptools>=77" | $(BIN)/uv pip compile - --generate-hashes \
	  --python-version 3.11 --python-platform linux --no-header --quiet; } > requirements-build.lock.new \
	  && mv requirements-build.lock.new requirements-build.lock

lint: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check
	$(BIN)/mypy

# kube-apiserver + etcd for the tests marked k8s (scripts/envtest.sh; versions
# pinned in scripts/envtest-versions.env; cached in ~/.cache/vcbus/envtest).
# Never fails the build: without the binaries the k8s tests skip with a message
# (or fail when VCBUS_REQUIRE_K8S=1).
envtest:
	@scripts/envtest.sh >/dev/null || echo "make envtest: no kube-apiserver/etcd; the k8s tests will skip (fail if VCBUS_REQUIRE_K8S=1)" >&2

# KWOK (sigs.k8s.io/kwok), the kubelets of fake nodes for the KWOK tests and benchmarks/cluster.py
# (scripts/kwok.sh; version pinned in scripts/envtest-versions.env; built from the Go module proxy
# into ~/.cache/vcbus/kwok). Never fails the build: without it those tests skip with a message
# (or fail when VCBUS_REQUIRE_K8S=1).
kwok:
	@scripts/kwok.sh >/dev/null || echo "make kwok: no kwok; the KWOK tests will skip (fail if VCBUS_REQUIRE_K8S=1)" >&2

# Debian's chromium for the browser tests (the `vcbus replay --html` page). Installed
# with apt-get when /usr/bin/chromium is missing (sudo only when not root). Never fails
# the build: without it those tests skip with a message (or fail when
# VCBUS_REQUIRE_BROWSER=1 or VCBUS_REQUIRE_K8S=1).
browser:
	@scripts/install-browser.sh

# The npm dependency of the JavaScript subscriber example (examples/subscribers/js), for its
# test. Never fails the build: without node/npm or the registry that test skips with a message
# (or fails when VCBUS_REQUIRE_K8S=1).
js-example:
	@scripts/install-js-example.sh

# zsh and fish for the completion tests (apt-get, as `browser`). Never fails the build: without
# them those tests skip with a message (or fail when VCBUS_REQUIRE_K8S=1).
shells:
	@scripts/install-shells.sh

# helm for the chart tests (tests/test_helm_chart.py), built from the Go module proxy into
# ~/.cache/vcbus/helm (scripts/install-helm.sh pins the version). Never fails the build: without
# it those tests skip with a message (or fail when VCBUS_REQUIRE_K8S=1).
helm:
	@scripts/install-helm.sh >/dev/null || echo "make helm: no helm; the chart tests will skip (fail if VCBUS_REQUIRE_K8S=1)" >&2

# The set-up steps side by side, each one's time reported (scripts/test-setup.sh); then lint and the suite.
setup:
	@scripts/test-setup.sh $(MAKE)

test: $(STAMP) setup lint
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

# The demo keeps its bus in vcbus's default store, so the README's next commands read it; then the PATH line.
run: $(STAMP)
	$(BIN)/vcbus demo --keep
	@echo "vcbus is in $(abspath $(BIN)); to run it as vcbus:"
	@echo '  export PATH="$(abspath $(BIN)):$$PATH"'

# Generated documents (tests check they are current).
docs: $(STAMP)
	$(BIN)/python -c "from statemachines.job.diagram import document; print(document(), end='')" > docs/statemachines/job.md
	$(BIN)/python -c "from statemachines.queues.diagram import document; print(document(), end='')" > docs/statemachines/queue.md
	$(BIN)/python -c "from statemachines.task.diagram import document; print(document(), end='')" > docs/statemachines/task.md
	$(BIN)/python -c "from statemachines.cronjobs.diagram import document; print(document(), end='')" > docs/statemachines/cronjob.md
	$(BIN)/python -c "from statemachines.jobflows.diagram import document; print(document(), end='')" > docs/statemachines/jobflow.md
	$(BIN)/python -m tools.schemas
	$(BIN)/python -m tools.asyncapi
	$(BIN)/python -m tools.replay_schema

# The screenshot in docs/replay.md, taken with the headless chromium the tests use.
docs-images: $(STAMP) browser
	$(BIN)/python scripts/replay_screenshot.py docs/images/replay-html.png

bench: $(STAMP)
	$(BIN)/python benchmarks/replay.py --quick
	$(BIN)/python benchmarks/replay_text.py --quick
	$(BIN)/python benchmarks/scheduler.py --quick

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
