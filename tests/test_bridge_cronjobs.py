"""The bridge publishes Volcano's CronJobs with the time zones they name, read from the tz database here
(the domain loads none), on `vcbus.k8s.cronjob.<namespace>.<name>`; the decider decodes them so."""

from __future__ import annotations

import json

import pytest

from statemachines.model.cronjob import CronJobRecord
from statemachines.model.records import decode
from statemachines.model.zone import Zone
from tests.test_bridge import bridge_running, create, js, patch, wait_recs  # noqa: F401 - js: the fixture
from vcbus.cronjobs.zonedata import zone

pytestmark = [pytest.mark.k8s, pytest.mark.nats]


def cronjob(name: str, **spec) -> dict:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"tasks": [{"name": "t", "replicas": 1}]}},
                     **spec}}


async def test_a_cronjob_is_bridged_with_the_zones_it_names(k8s, k8s_namespace, js):
    api, ns = k8s.api_client(), k8s_namespace
    await create(api, "cronjobs", ns, cronjob("paris", timeZone="Europe/Paris"))
    async with bridge_running(js, api, ns):
        recs = await wait_recs(js, ns, 1, timeout=60)
        await patch(api, "cronjobs", ns, "paris", {"spec": {"timeZone": "Nowhere/Atlantis"}})
        await create(api, "cronjobs", ns, cronjob("plain"))
        recs = await wait_recs(js, ns, 3, timeout=60)
    assert [r.short for r in recs] == [("ADDED", "CronJob", "paris"), ("MODIFIED", "CronJob", "paris"),
                                       ("ADDED", "CronJob", "plain")]
    assert recs[0].subject == f"vcbus.k8s.cronjob.{ns}.paris"
    first = decode(json.dumps(recs[0].record).encode())
    assert isinstance(first, CronJobRecord) and first.object.spec.time_zone == "Europe/Paris"
    assert first.zones == {"Europe/Paris": zone("Europe/Paris")} and len(first.zones["Europe/Paris"].transitions) > 200
    unknown = decode(json.dumps(recs[1].record).encode())
    assert unknown.zones == {"Nowhere/Atlantis": Zone(name="Nowhere/Atlantis", error="unknown time zone Nowhere/Atlantis")}
    assert recs[2].record["zones"] == {}


def test_vcbus_record_of_cronjobs_carries_their_zones_too(k8s, k8s_namespace, tmp_path):
    """`vcbus record --kind cronjobs` writes the records the bridge would publish: with `zones`."""
    from kubernetes import client

    from tests.test_record import vcbus

    ns = k8s_namespace
    client.CustomObjectsApi(k8s.api_client()).create_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", ns, "cronjobs", cronjob("tokyo", timeZone="Asia/Tokyo"))
    log = tmp_path / "cronjobs.log"
    res = vcbus("record", "--kubeconfig", str(k8s.kubeconfig), "-n", ns, "--kind", "cronjobs", "--for", "2s",
                "-o", str(log))
    assert res.returncode == 0, res.stderr.decode()
    [line] = [json.loads(x) for x in log.read_text().splitlines() if '"CronJob"' in x]
    rec = decode(json.dumps(line).encode())
    assert isinstance(rec, CronJobRecord) and rec.zones == {"Asia/Tokyo": zone("Asia/Tokyo")}


async def test_without_the_cronjob_crd_vcjobs_are_bridged_and_cronjobs_once_it_is_installed(
        k8s, k8s_namespace, js, caplog, monkeypatch):
    """A cluster with an older Volcano's CRDs has no CronJob kind: the bridge says so once and does not
    hold vcjobs back for it (vcjobs wait for every other kind's first list); installed later, it is bridged."""

    from kubernetes import client

    from tests.test_bridge import vcjob
    from vcbus.k8s import bridge as bridging

    monkeypatch.setattr(bridging, "INSTALL_POLL", 0.5)  # not 30 s: the test installs the CRD at once
    api, ns = k8s.api_client(), k8s_namespace
    ext = client.ApiextensionsV1Api(api)
    [doc] = [d for d in k8s.crd_documents() if d["metadata"]["name"] == "cronjobs.batch.volcano.sh"]
    ext.delete_custom_resource_definition("cronjobs.batch.volcano.sh")
    try:
        await crd_gone(api, ns, "batch.volcano.sh", "cronjobs")
        await create(api, "vcjobs", ns, vcjob("j"))
        caplog.set_level("WARNING", logger="vcbus.bridge")
        async with _bridge_without_cronjob_watcher(js, api, ns) as bridge:
            recs = await wait_recs(js, ns, 1, timeout=60)
            assert [r.short for r in recs] == [("ADDED", "Job", "j")]
            assert any("cronjobs (batch.volcano.sh/v1alpha1) is not installed" in m for m in caplog.messages)
            k8s.install_crds([doc])
            await create(api, "cronjobs", ns, cronjob("later"))
            recs = await wait_recs(js, ns, 2, timeout=60)
            assert recs[1].short == ("ADDED", "CronJob", "later") and bridge.listed["cronjobs"].is_set()
    finally:
        k8s.install_crds([doc])


async def crd_gone(api, ns: str, group: str, plural: str) -> None:
    """Wait until the API server no longer serves `plural` (its CRD deleted: the kind's handler goes)."""
    import asyncio

    from kubernetes import client

    deadline = asyncio.get_running_loop().time() + 60
    while True:
        try:
            client.CustomObjectsApi(api).list_namespaced_custom_object(group, "v1alpha1", ns, plural)
        except client.ApiException as err:
            if err.status == 404:
                return
            raise
        assert asyncio.get_running_loop().time() < deadline, f"the {plural} CRD was never removed"
        await asyncio.sleep(0.2)


def _bridge_without_cronjob_watcher(js, api, ns):
    """`bridge_running`, which waits for every watcher to connect: the CronJob one does not exist yet."""
    import asyncio
    import contextlib

    from vcbus.k8s.bridge import Bridge

    @contextlib.asynccontextmanager
    async def running():
        bridge = Bridge(js, api, namespace=ns)
        stop = asyncio.Event()
        task = asyncio.create_task(bridge.run(stop), name="test-bridge")
        try:
            yield bridge
            assert not task.done(), "the bridge ended on its own"
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)

    return running()
