"""`vcbus webhook --context`: the queues come from the kubeconfig context named, not the current one (real apiserver)."""

from __future__ import annotations

import copy
import uuid

import pytest
import yaml

from vcbus.cli.main import main
from vcbus.webhook.queues import cluster_queues

pytestmark = pytest.mark.k8s


def _two_contexts(k8s, tmp_path):
    """The envtest kubeconfig plus a current context `broken` whose server refuses connections."""
    cfg = yaml.safe_load(k8s.kubeconfig.read_text())
    broken = copy.deepcopy(cfg["clusters"][0])
    broken["name"], broken["cluster"]["server"] = "broken", "https://127.0.0.1:1"
    cfg["clusters"].append(broken)
    cfg["contexts"].append({"name": "broken", "context": {"cluster": "broken", "user": cfg["users"][0]["name"]}})
    cfg["current-context"] = "broken"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_queues_come_from_the_named_context(k8s, tmp_path):
    from kubernetes import client

    name = f"ctx-{uuid.uuid4().hex[:6]}"
    client.CustomObjectsApi(k8s.api_client()).create_cluster_custom_object(
        "scheduling.volcano.sh", "v1beta1", "queues",
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": {"weight": 1}},
    )  # fmt: skip
    kubeconfig = _two_contexts(k8s, tmp_path)
    assert cluster_queues(str(kubeconfig), context="envtest", ttl=0)().get(name) is not None
    with pytest.raises(Exception):  # noqa: B017 - the current context's server refuses: urllib3's error
        cluster_queues(str(kubeconfig), ttl=0)()


def test_webhook_cli_has_context_and_names_an_unknown_one(k8s, tmp_path, capsys):
    kubeconfig = _two_contexts(k8s, tmp_path)
    (tmp_path / "c").write_text("x")
    code = main(["webhook", "--tls-cert", str(tmp_path / "c"), "--tls-key", str(tmp_path / "c"),
                 "--kubeconfig", str(kubeconfig), "--context", "nope"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "cannot reach the cluster for queues" in err and "nope" in err
