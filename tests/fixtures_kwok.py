"""The `kwok` session fixture: KWOK (sigs.k8s.io/kwok) as the kubelets of fake nodes on the `k8s` API server.

Tests that use it carry `@pytest.mark.k8s`. Without the kwok binary (see `scripts/kwok.sh` /
`make kwok`) they are skipped with a message saying how to get it, or fail if
`VCBUS_REQUIRE_K8S=1` (CI), exactly as the `k8s` fixture treats missing envtest binaries.

The yielded `tests.kwok_env.Kwok` manages only nodes annotated `kwok.x-k8s.io/node=fake`
(`kwok_env.create_nodes()`, then `kwok_env.wait_nodes_ready()`); it runs bound pods (Running) and
deletes deleted ones, and never ends a pod by itself (`kwok_env.fail_pod()` / `succeed_pod()`).
It is stopped at the end of the session (SIGTERM, then SIGKILL); the tail of its log is added to
the report of every failed test that used it.
"""

from __future__ import annotations

import pytest

from tests import kwok_env
from tests.fixtures_k8s import _require_k8s


@pytest.fixture(scope="session")
def kwok(request, tmp_path_factory):
    binary = kwok_env.kwok_binary()
    if binary is None:
        msg = kwok_env.missing_kwok_message()
        if _require_k8s():
            pytest.fail(f"VCBUS_REQUIRE_K8S=1 but {msg}", pytrace=False)
        pytest.skip(msg)
    k8s = request.getfixturevalue("k8s")  # after the check: no API server started for a skip
    proc = kwok_env.Kwok(binary, k8s.kubeconfig, tmp_path_factory.mktemp("kwok"))
    try:
        proc.start()
    except BaseException:
        proc.stop()
        raise
    try:
        yield proc
    finally:
        proc.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and "kwok" in getattr(item, "fixturenames", ()):
        proc = getattr(item, "funcargs", {}).get("kwok")
        if isinstance(proc, kwok_env.Kwok):
            report.sections.append((f"kwok log ({proc.log}, last 60 lines)", proc.log_tail(60)))
