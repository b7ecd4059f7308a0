"""The bridge publishes Volcano's JobFlows and JobTemplates on `vcbus.k8s.jobflow.<namespace>.<name>` and
`vcbus.k8s.jobtemplate.<namespace>.<name>`; the decider decodes them so. A cluster without their CRDs
(Volcano installed without its flow CRDs, or an older Volcano) is told so once, and nothing is held back."""

from __future__ import annotations

import json

import pytest

from statemachines.model.jobflow import FlowRecord, JobFlow, JobTemplate
from statemachines.model.records import decode
from tests.test_bridge import bridge_running, create, js, wait_recs  # noqa: F401 - js: the fixture
from tests.test_bridge_cronjobs import _bridge_without_cronjob_watcher, crd_gone

pytestmark = [pytest.mark.k8s, pytest.mark.nats]
TEMPLATE_SPEC = {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1}]}


def template(name: str) -> dict:
    return {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate", "metadata": {"name": name},
            "spec": TEMPLATE_SPEC}


def jobflow(name: str, *flows: str) -> dict:
    return {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": name},
            "spec": {"flows": [{"name": f} for f in flows]}}


async def test_jobflows_and_jobtemplates_are_bridged_on_their_subjects(k8s, k8s_namespace, js):
    api, ns = k8s.api_client(), k8s_namespace
    await create(api, "jobtemplates", ns, template("a"))
    async with bridge_running(js, api, ns):
        recs = await wait_recs(js, ns, 1, timeout=60)
        await create(api, "jobflows", ns, jobflow("flow", "a"))
        recs = await wait_recs(js, ns, 2, timeout=60)
    assert [r.short for r in recs] == [("ADDED", "JobTemplate", "a"), ("ADDED", "JobFlow", "flow")]
    assert [r.subject for r in recs] == [f"vcbus.k8s.jobtemplate.{ns}.a", f"vcbus.k8s.jobflow.{ns}.flow"]
    first, second = (decode(json.dumps(r.record).encode()) for r in recs)
    assert isinstance(first, FlowRecord) and isinstance(first.object, JobTemplate)
    assert isinstance(second, FlowRecord) and isinstance(second.object, JobFlow)
    assert [f.name for f in second.object.spec.flows] == ["a"]


async def test_without_the_flow_crds_vcjobs_are_bridged_and_jobflows_once_installed(
        k8s, k8s_namespace, js, caplog, monkeypatch):
    from kubernetes import client

    from tests.test_bridge import vcjob
    from vcbus.k8s import bridge as bridging

    monkeypatch.setattr(bridging, "INSTALL_POLL", 0.5)  # not 30 s: the test installs the CRDs at once
    api, ns = k8s.api_client(), k8s_namespace
    ext = client.ApiextensionsV1Api(api)
    names = ("jobflows.flow.volcano.sh", "jobtemplates.flow.volcano.sh")
    docs = [d for d in k8s.crd_documents() if d["metadata"]["name"] in names]
    for name in names:
        ext.delete_custom_resource_definition(name)
    try:
        for plural in ("jobflows", "jobtemplates"):
            await crd_gone(api, ns, "flow.volcano.sh", plural)
        await create(api, "vcjobs", ns, vcjob("j"))
        caplog.set_level("WARNING", logger="vcbus.bridge")
        async with _bridge_without_cronjob_watcher(js, api, ns) as bridge:
            recs = await wait_recs(js, ns, 1, timeout=60)
            assert [r.short for r in recs] == [("ADDED", "Job", "j")]
            assert any("jobflows (flow.volcano.sh/v1alpha1) is not installed" in m for m in caplog.messages)
            assert any("jobtemplates (flow.volcano.sh/v1alpha1) is not installed" in m for m in caplog.messages)
            k8s.install_crds(docs)
            await create(api, "jobflows", ns, jobflow("later"))
            recs = await wait_recs(js, ns, 2, timeout=60)
            assert recs[1].short == ("ADDED", "JobFlow", "later") and bridge.listed["jobflows"].is_set()
    finally:
        k8s.install_crds(docs)
