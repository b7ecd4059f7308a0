"""Two `vcbus up --leader-elect` replicas on a real API server and nats-server: kill the leader mid-job.

The seed job runs as in tests/test_e2e_cluster.py (vcbus schedules, binds and
controls it; KWOK is the kubelet of its one node, the test ends pods as a
kubelet would). Two replicas share the bus and the cluster; only the holder of
the Lease runs the services, the other stands by (its /readyz says so). Right
after worker-1 fails, the leader is SIGKILLed: the standby must take the Lease
over and carry the job to Completed, with no
duplicate pod (one uid per pod name and job version, every pod bound once),
no lost decision (every record decided, every command carried out, and the
log replayed offline gives the live final status), and every write of the
second half carrying the new leader's identity (the field manager of what it
created is its own, never the dead leader's).
"""

from __future__ import annotations

import pathlib
import sys
import urllib.error
import urllib.request

import pytest
import yaml
from kubernetes import client

from tests import kwok_env
from tests.test_e2e_cluster import (
    NAME,
    SEED,
    G,
    SeedRun,
    UpProcess,
    V,
    check_completed_job,
    default_queue_open,
    kwok_node,
    replayed_status,
    sched_binds,
    version_of,
    wait_until,
)
from tests.test_observability import free_port
from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]
LEASE = "vcbus-e2e"


class Replica(UpProcess):
    """One `vcbus up --leader-elect` process; its identity starts with `name` (HOSTNAME)."""

    def __init__(self, name: str, nats_url: str, kubeconfig: str, namespace: str, log: pathlib.Path) -> None:
        self.name = name
        self.port = free_port()
        super().__init__([sys.executable, "-m", "vcbus.cli.main", "up", "--nats", nats_url, "--kubeconfig", kubeconfig,
                          "--namespace", namespace, "-v", "--leader-elect", "--lease-name", LEASE,
                          "--lease-namespace", namespace, "--lease-duration", "4s",
                          "--metrics-addr", f"127.0.0.1:{self.port}"], log, env={"HOSTNAME": name})

    def readyz(self) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=5) as r:
                return r.read().decode().strip()
        except (urllib.error.URLError, OSError) as err:
            return f"unreachable: {err}"


class Pair:
    """Both replicas, seen by SeedRun as the one `vcbus` it drives (check/alive/start/log/tail)."""

    def __init__(self, a: Replica, b: Replica) -> None:
        self.replicas = (a, b)
        self.restart_due = False
        self.log = a.log

    def check(self) -> None:
        for r in self.replicas:
            if r.proc is not None and r.proc.poll() is not None and not r.killed:
                pytest.fail(f"replica {r.name} exited with {r.proc.returncode}:\n{r.tail()}", pytrace=False)

    def alive(self) -> bool:
        return True  # the test restarts a killed replica itself

    def start(self) -> None:
        raise AssertionError("not restarted by SeedRun")

    def tail(self) -> str:
        return "\n".join(f"--- {r.name}:\n{r.tail()}" for r in self.replicas)


def holder(api, namespace: str) -> str:
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(LEASE, namespace)
    except client.ApiException as err:
        if err.status == 404:
            return ""
        raise
    return lease.spec.holder_identity or ""


def vcbus_managers(obj: dict) -> set[str]:
    return {f["manager"] for f in obj["metadata"].get("managedFields") or [] if f["manager"].startswith("vcbus-")}


def test_killing_the_leader_mid_job_hands_over_without_duplicates_or_lost_decisions(
        k8s, kwok, nats_server, bus_settings, webhook, tmp_path):  # noqa: F811 - the fixture
    namespace = webhook["namespace"]
    api = k8s.api_client()
    custom = client.CustomObjectsApi(api)
    node = kwok_node(api, kwok, f"kwok-ha-{namespace[-6:]}")
    a = Replica("replica-a", nats_server.url, k8s.kubeconfig, namespace, tmp_path / "a.log")
    b = Replica("replica-b", nats_server.url, k8s.kubeconfig, namespace, tmp_path / "b.log")
    pair = Pair(a, b)
    run = SeedRun(k8s, kwok, pair, namespace, nats_server.url)
    by_name = {"replica-a": a, "replica-b": b}
    try:
        a.start()
        first = wait_until("a leader", lambda: holder(api, namespace), vc=pair, explain=pair.tail)
        leader = by_name[first.split("_")[0]]
        b.start()
        standby = b if leader is a else a
        wait_until("the standby's /readyz", lambda: standby.readyz() == "ok (standby)", vc=pair,
                   explain=lambda: standby.readyz() + "\n" + pair.tail())
        wait_until("the default queue, Open", lambda: default_queue_open(api), vc=pair, explain=pair.tail)
        custom.create_namespaced_custom_object(G, V, namespace, "jobs", yaml.safe_load(SEED.read_text()))
        run.wait("3 running pods, and the status saying so",
                 lambda seen: len(seen.running) == 3 and seen.status.get("running") == 3)
        assert leader.readyz() == "ok (leader)"
        assert holder(api, namespace) == first

        kwok_env.fail_pod(api, namespace, f"{NAME}-worker-1", 1)
        leader.kill()  # mid-job: the restart worker-1's failure causes is not decided or not carried out yet
        second = wait_until("the standby to take the Lease over", lambda: (h := holder(api, namespace)) != first and h,
                            vc=pair, explain=pair.tail)
        assert second.startswith(standby.name + "_")
        leader.start()  # the killed one comes back, as its pod would, and stands by
        run.wait("the restart: retryCount 1, 3 running pods of a new version",
                 lambda seen: seen.status.get("retryCount") == 1 and len(seen.running) == 3
                 and all(version_of(p) != "0" for p in seen.running.values()))
        new_pods = list(run.last.running.values())  # created and bound after the hand-over
        kwok_env.succeed_pod(api, namespace, f"{NAME}-master-0")
        run.wait("the job Completed", lambda seen: seen.status.get("state", {}).get("phase") == "Completed")
        run.wait("vcbus to settle (everything recorded, decided and carried out)", run.settled)
        wait_until("the restarted replica to stand by", lambda: leader.readyz() == "ok (standby)", vc=pair,
                   explain=lambda: leader.readyz() + "\n" + pair.tail())
        assert holder(api, namespace) == second
        job = custom.get_namespaced_custom_object(G, V, namespace, "jobs", NAME)
    finally:
        a.stop()
        b.stop()
        kwok_env.delete_nodes(api, [node])
    check_completed_job(k8s, namespace, job, run.seen, sched_binds(nats_server.url))
    assert replayed_status(nats_server.url, tmp_path, namespace) == job["status"]
    assert all(vcbus_managers(p) == {f"vcbus-{second}"} for p in new_pods), [vcbus_managers(p) for p in new_pods]
