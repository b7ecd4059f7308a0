"""Failures that explain themselves, on a real API server with RBAC and a real nats-server.

- a service account without the rights (the admin client impersonating a user
  RBAC grants nothing) stops the actuator and the bridge with a message naming
  the verb and the resource to grant;
- a command the API server refuses for good (422: an invalid label) is
  recorded as refused with a Warning Event on its vcjob, and the command after
  it is applied;
- an API server that does not answer (a closed port) is retried with jittered
  backoff, each try logged with the time to the next, and the command stays
  unacknowledged for the next run.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from kubernetes import client

from statemachines import outputs as o
from tests.test_actuator_service import publish, until
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.k8s.actuating import DURABLE, ActuatorService
from vcbus.k8s.apierrors import PermissionDenied
from vcbus.k8s.bridge import Bridge

pytestmark = [pytest.mark.k8s, pytest.mark.nats]
T1 = "2026-11-30T08:05:00Z"
JOBS = ("batch.volcano.sh", "v1alpha1")
PGS = ("scheduling.volcano.sh", "v1beta1")


def nobody(k8s):
    """An API client the API server authenticates but RBAC grants nothing (impersonation by the admin)."""
    api = k8s.api_client()
    api.set_default_header("Impersonate-User", "vcbus-without-rbac")
    return api


def vcjob(api, ns: str, name: str = "j") -> dict:
    return client.CustomObjectsApi(api).create_namespaced_custom_object(*JOBS, ns, "jobs", {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
        "spec": {"minAvailable": 1, "queue": "default", "tasks": [{"name": "t", "replicas": 1, "template": {
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}})


def podgroup(job: dict, name: str, labels: dict[str, str] | None = None) -> dict:
    meta = job["metadata"]
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels or {},
                         "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                              "name": meta["name"], "uid": meta["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"minMember": 1, "queue": "default"}}


async def test_forbidden_stops_the_actuator_naming_the_verb_and_resource(k8s, k8s_namespace, bus_settings):
    job = vcjob(k8s.api_client(), k8s_namespace)
    cmd = o.CreatePodGroup(job=f"{k8s_namespace}/j", seq=3, time=T1, name="j-pg", job_uid=job["metadata"]["uid"],
                           podgroup=podgroup(job, "j-pg"))
    async with open_bus(bus_settings) as bus:
        await publish(bus.js, cmd, "3:0")
        service = ActuatorService(bus, nobody(k8s))
        with pytest.raises(PermissionDenied) as denied:
            await asyncio.wait_for(service.run(stop=asyncio.Event()), 60)
        info = await bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
    message = str(denied.value)
    assert message.startswith("actuator: permission denied: cannot get jobs.batch.volcano.sh")
    assert f'in namespace "{k8s_namespace}"' in message
    assert "grant verb 'get' on resource 'jobs' (apiGroup 'batch.volcano.sh')" in message
    assert denied.value.exit_code == 4
    assert info.ack_floor.stream_seq == 0  # not acked: the command waits for a role that allows it


async def test_forbidden_stops_the_bridge_naming_the_verb_and_resource(k8s, bus_settings):
    async with open_bus(bus_settings) as bus:
        bridge = Bridge(bus.js, nobody(k8s), resources=("pods",))
        with pytest.raises(PermissionDenied) as denied:
            await asyncio.wait_for(bridge.run(asyncio.Event()), 60)
    assert str(denied.value).startswith("bridge: permission denied: cannot list pods (403 Forbidden: ")
    assert "grant verb 'list' on resource 'pods' (apiGroup '')" in str(denied.value)


async def run_until(bus, api, result: str) -> ActuatorService:
    """An actuator run on `bus` until a command ends as `result` (the command after a refused one), then stopped:
    a run that stopped by itself (PermissionDenied) raises."""
    service = ActuatorService(bus, api)
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop=stop))
    try:
        await until(lambda: service.results.get(result, 0) >= 1 or task.done(), "the command after", 60)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    return service


async def test_a_command_refused_for_good_is_recorded_and_does_not_block_the_next(k8s, k8s_namespace, bus_settings):
    api = k8s.api_client()
    ns = k8s_namespace
    job = vcjob(api, ns)
    uid = job["metadata"]["uid"]
    invalid = o.CreatePodGroup(job=f"{ns}/j", seq=3, time=T1, name="j-bad", job_uid=uid,
                               podgroup=podgroup(job, "j-bad", {"bad": "not a label value!"}))
    valid = o.CreatePodGroup(job=f"{ns}/j", seq=4, time=T1, name="j-good", job_uid=uid, podgroup=podgroup(job, "j-good"))
    async with open_bus(bus_settings) as bus:
        await publish(bus.js, invalid, "3:0")
        await publish(bus.js, valid, "4:0")
        service = await run_until(bus, api, "applied")
        info = await bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
    assert service.results["refused"] == 1 and service.results["applied"] == 1
    assert info.ack_floor.stream_seq == 2  # both acked
    custom = client.CustomObjectsApi(api)
    assert [p["metadata"]["name"] for p in custom.list_namespaced_custom_object(*PGS, ns, "podgroups")["items"]] == [
        "j-good"]
    (event,) = [e for e in client.CoreV1Api(api).list_namespaced_event(ns).items if e.reason == "CommandRefused"]
    assert (event.type, event.involved_object.kind, event.involved_object.uid) == ("Warning", "Job", uid)
    assert "CreatePodGroup" in event.message and "422" in event.message


async def test_an_unreachable_api_server_is_retried_with_backoff_saying_when(k8s, k8s_namespace, bus_settings, caplog):
    with socket.socket() as sock:  # a port nobody listens on: connection refused, a real fault
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    api = k8s.api_client()
    api.configuration.host = f"https://127.0.0.1:{port}"
    api.rest_client.pool_manager.clear()
    cmd = o.DeletePodGroup(job=f"{k8s_namespace}/j", seq=3, time=T1, name="j-pg")
    caplog.set_level(logging.WARNING, logger="vcbus")
    async with open_bus(bus_settings) as bus:
        await publish(bus.js, cmd, "3:0")
        service = ActuatorService(bus, api, max_backoff=0.5)
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(stop=stop))
        try:
            await until(lambda: caplog.text.count("next try in") >= 3 or task.done(), "three retries", 60)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
        info = await bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
    assert service.results["failed"] >= 3 and "applied" not in {k for k, v in service.results.items() if v}
    assert "actuator: API server unreachable" in caplog.text
    assert info.ack_floor.stream_seq == 0  # left for the next run


def test_vcbus_up_with_rejected_credentials_exits_4_saying_so(k8s, bus_settings, tmp_path):
    """The CLI end to end: a kubeconfig whose token the API server does not know (401)."""
    import subprocess
    import sys

    import yaml

    from tests.fixtures_nats import ROOT

    config = yaml.safe_load(k8s.kubeconfig.read_text())
    config["users"] = [{"name": "envtest-admin", "user": {"token": "not-a-token-this-server-knows"}}]
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text(yaml.safe_dump(config))
    res = subprocess.run(
        [sys.executable, "-m", "vcbus.cli.main", "up", "--nats", bus_settings.nats_url, "--kubeconfig", str(bad),
         "--metrics-addr", "", "--no-scheduler"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert res.returncode == 4, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: bridge: the API server rejected the credentials (401 Unauthorized) while watching ")
    assert "Traceback" not in res.stderr
