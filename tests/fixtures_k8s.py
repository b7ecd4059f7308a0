"""The `k8s` session fixture: a real etcd + kube-apiserver with the vcbus CRDs installed.

Tests that use it must carry `@pytest.mark.k8s`. Without the envtest binaries
(see `scripts/envtest.sh` / `make envtest`) those tests are skipped with a
message saying how to get them, or fail if `VCBUS_REQUIRE_K8S=1` (CI).

The yielded `tests.k8s_env.EnvTest` offers `.kubeconfig`, `.url`,
`.api_client()`, `.stop_apiserver()` / `.start_apiserver()` (same etcd, same
port), `.kill_apiserver()` (SIGKILL), `.signal_etcd(sig)`, `.compact_etcd()`, `.etcd_revision()` and `.create_namespace()`.
`k8s_namespace` gives each test a fresh namespace (namespaces are never
deleted: without kube-controller-manager they would stay Terminating).
"""

from __future__ import annotations

import os
import re
import uuid

import pytest

from tests import k8s_env


def _require_k8s() -> bool:
    return os.environ.get("VCBUS_REQUIRE_K8S", "") not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def k8s(tmp_path_factory):
    assets = k8s_env.asset_dir()
    if assets is None:
        msg = k8s_env.missing_assets_message()
        if _require_k8s():
            pytest.fail(f"VCBUS_REQUIRE_K8S=1 but {msg}", pytrace=False)
        pytest.skip(msg)
    env = k8s_env.EnvTest(assets, tmp_path_factory.mktemp("envtest"))
    try:
        env.start()
    except BaseException:
        env.stop()
        raise
    try:
        yield env
    finally:
        env.stop()


@pytest.fixture
def k8s_namespace(k8s, request) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    return k8s.create_namespace(f"{base}-{uuid.uuid4().hex[:6]}")
