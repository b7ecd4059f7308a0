# vcbus developer entry points. `make test` works on a fresh machine: it creates
# the virtual env, installs everything, builds/fetches the test binaries and runs
# the whole suite (layering contracts included).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv test test-fast lint run bench envtest docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/lint-imports

# kube-apiserver + etcd for the tests marked k8s (scripts/envtest.sh; versions
# pinned in scripts/envtest-versions.env; cached in ~/.cache/vcbus/envtest).
# Never fails the build: without the binaries the k8s tests skip with a message
# (or fail when VCBUS_REQUIRE_K8S=1).
envtest:
	@scripts/envtest.sh >/dev/null || echo "make envtest: no kube-apiserver/etcd; the k8s tests will skip (fail if VCBUS_REQUIRE_K8S=1)" >&2

test: $(STAMP) envtest
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

run: $(STAMP)
	$(BIN)/vcbus demo

# Generated documents (tests check they are current).
docs: $(STAMP)
	$(BIN)/python -c "from statemachines.job.diagram import document; print(document(), end='')" > docs/statemachines/job.md
	$(BIN)/python -c "from statemachines.queues.diagram import document; print(document(), end='')" > docs/statemachines/queue.md
	$(BIN)/python -m vcbus.bus.schemas

bench: $(STAMP)
	$(BIN)/python benchmarks/replay.py --quick
	$(BIN)/python benchmarks/scheduler.py --quick

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
