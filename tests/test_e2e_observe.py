"""`vcbus up --observe-only` beside a (played) Volcano: nothing is acted on, divergences are recorded."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client

from tests.test_e2e_cluster import G, NAME, SEED, V, Vcbus, ensure_default_queue, vcbus_cli

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]


def test_observe_only_records_divergences_and_touches_nothing(k8s, k8s_namespace, nats_server, bus_settings, tmp_path):
    import yaml

    api = k8s.api_client()
    custom = client.CustomObjectsApi(api)
    ensure_default_queue(api)
    vc = Vcbus(nats_server.url, k8s.kubeconfig, k8s_namespace, tmp_path / "observe.log")
    vc.cmd.append("--observe-only")
    vc.start()
    try:
        custom.create_namespaced_custom_object(G, V, k8s_namespace, "jobs", yaml.safe_load(SEED.read_text()))
        # "Volcano" initialises the job as vcbus would (no divergence) ...
        time.sleep(1.0)
        custom.patch_namespaced_custom_object_status(
            G, V, k8s_namespace, "jobs", NAME, {"status": {"state": {"phase": "Pending"}, "minAvailable": 3}}
        )
        # ... then claims Running although no pod exists: vcbus keeps Pending
        time.sleep(0.5)
        custom.patch_namespaced_custom_object_status(
            G, V, k8s_namespace, "jobs", NAME, {"status": {"state": {"phase": "Running"}, "minAvailable": 3}}
        )
        deadline = time.monotonic() + 30
        rows: list = []
        while time.monotonic() < deadline:
            res = vcbus_cli("divergences", "--nats", nats_server.url, "--job", f"{k8s_namespace}/{NAME}", "-o", "json")
            rows = json.loads(res.stdout or b"[]")
            if rows:
                assert res.returncode == 1
                break
            assert res.returncode == 0, res.stderr.decode()
            time.sleep(0.5)
        assert [(r["field"], r["recorded"], r["decided"]) for r in rows] == [("phase", "Running", "Pending")]
        human = vcbus_cli("divergences", "--nats", nats_server.url)
        assert human.returncode == 1 and b"recorded Running" in human.stdout
        # observe only: vcbus created nothing and wrote nothing
        assert client.CoreV1Api(api).list_namespaced_pod(k8s_namespace).items == []
        pgs = custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", k8s_namespace, "podgroups")
        assert pgs["items"] == []
        status = custom.get_namespaced_custom_object(G, V, k8s_namespace, "jobs", NAME)["status"]
        assert status["state"]["phase"] == "Running"  # what "Volcano" wrote stays
        assert vc.alive()
        # and stored no command for anyone to carry out later
        import asyncio

        from vcbus.bus import subjects as s
        from vcbus.bus.connecting import connect

        async def cmds_count() -> int:
            nc = await connect(nats_server.url)
            try:
                info = await nc.jetstream().stream_info(s.CMDS_STREAM)
                return info.state.messages
            finally:
                await nc.close()

        assert asyncio.run(cmds_count()) == 0
    finally:
        vc.stop()
