"""`vcbus up --observe-only` beside a (played) Volcano: nothing is acted on, divergences are recorded.

Each status write of the played Volcano waits until the bridge has recorded the
previous one (a condition on VCBUS_K8S, not a sleep), so vcbus sees every step.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml
from kubernetes import client

from tests.test_e2e_cluster import NAME, PG, SEED, G, V, Vcbus, ensure_default_queue, recorded, vcbus_cli, wait_until
from vcbus.bus import subjects as s
from vcbus.bus.connecting import connect

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]


async def stored_commands(nats_url: str) -> int:
    nc = await connect(nats_url)
    try:
        info = await nc.jetstream().stream_info(s.CMDS_STREAM)
        return info.state.messages
    finally:
        await nc.close()


def test_observe_only_records_divergences_and_touches_nothing(k8s, k8s_namespace, nats_server, bus_settings, tmp_path):
    api = k8s.api_client()
    custom = client.CustomObjectsApi(api)
    ensure_default_queue(api)
    vc = Vcbus(nats_server.url, k8s.kubeconfig, k8s_namespace, tmp_path / "observe.log")
    vc.cmd.append("--observe-only")
    vc.start()

    def wait_recorded(obj: dict, what: str) -> None:
        rv = obj["metadata"]["resourceVersion"]
        wait_until(f"the bridge to record {what} (resourceVersion {rv})",
                   lambda: recorded(nats_server.url, k8s_namespace, "Job", NAME, rv), vc=vc,
                   explain=lambda: f"vcbus up's log ends with:\n{vc.tail()}")

    try:
        created = custom.create_namespaced_custom_object(G, V, k8s_namespace, "jobs", yaml.safe_load(SEED.read_text()))
        wait_recorded(created, "the new job")
        # "Volcano" initialises the job as vcbus would (no divergence) ...
        pending = custom.patch_namespaced_custom_object_status(
            G, V, k8s_namespace, "jobs", NAME, {"status": {"state": {"phase": "Pending"}, "minAvailable": 3}}
        )
        wait_recorded(pending, "Volcano's Pending")
        # ... then claims Running although no pod exists: vcbus keeps Pending
        custom.patch_namespaced_custom_object_status(
            G, V, k8s_namespace, "jobs", NAME, {"status": {"state": {"phase": "Running"}, "minAvailable": 3}}
        )

        def divergences():
            res = vcbus_cli("divergences", "--nats", nats_server.url, "--job", f"{k8s_namespace}/{NAME}", "-o", "json")
            rows = json.loads(res.stdout or b"[]")
            assert res.returncode == (1 if rows else 0), res.stderr.decode()
            return rows

        rows = wait_until("vcbus to record a divergence", divergences, vc=vc,
                          explain=lambda: f"vcbus up log ends with:\n{vc.tail()}")
        assert [(r["field"], r["recorded"], r["decided"]) for r in rows] == [("phase", "Running", "Pending")]
        human = vcbus_cli("divergences", "--nats", nats_server.url)
        assert human.returncode == 1 and b"recorded Running" in human.stdout
        # observe only: vcbus created nothing and wrote nothing
        assert client.CoreV1Api(api).list_namespaced_pod(k8s_namespace).items == []
        assert custom.list_namespaced_custom_object(*PG, k8s_namespace, "podgroups")["items"] == []
        status = custom.get_namespaced_custom_object(G, V, k8s_namespace, "jobs", NAME)["status"]
        assert status["state"]["phase"] == "Running"  # what "Volcano" wrote stays
        assert vc.alive()
        # and stored no command for anyone to carry out later
        assert asyncio.run(stored_commands(nats_server.url)) == 0
    finally:
        vc.stop()
