"""A restart under a short scheduling period never shows a PodGroup phase its own sessions did not
compute (issue 32, item 1), on a real API server and KWOK nodes.

`vcbus up --kubeconfig --schedule-period 200ms` as a child process, KWOK as the kubelets of three
nodes (cpu 5: one seed pod of cpu 3 per node), the seed job (1 master + 2 workers, minAvailable 3,
PodFailed -> RestartJob). A failed worker restarts the job: the PodGroup is deleted and re-created
under the same name. Before status writes named their object's uid, a session that had seen the old
PodGroup (Running, with its conditions) wrote Running onto the new one, its pods were created before
it was ever Inqueue, and a pod was bound past the enqueue gate (3 of 3 restarts at 200 ms).

Checked, from watches of one etcd (resourceVersions order the two kinds): every PodGroup
incarnation (uid) is first seen without a phase or Pending, then Pending or Inqueue (before the
fix, a run showed a new PodGroup Unknown at once: a session's status for the deleted one), is
Inqueue before it is ever Running, and no pod of a job version is bound before that version's
PodGroup was Inqueue. Five restarts, each of a job whose PodGroup the scheduler has moved to
Running.
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from statemachines.admission.mutate import mutate_job
from tests import kwok_env
from tests.kwok_up import DEADLINE, Waiter, cleanup, queue_open, start_up
from tests.test_e2e_scheduler import NAME, seed_job
from vcbus.k8s.watching import ResourceWatcher

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

G, V = "batch.volcano.sh", "v1alpha1"
RESTARTS = 5  # the job's maxRetry is raised above it (the seed's 3 would end it on the third failure)


class History:
    """Every PodGroup and pod record of the namespace, in resourceVersion order."""

    def __init__(self, api, ns: str) -> None:
        self.pg_watch = ResourceWatcher(api, "podgroups", namespace=ns).start()
        self.pod_watch = ResourceWatcher(api, "pods", namespace=ns, label_selector="").start()
        self.podgroups: list[tuple[int, str, str, str]] = []  # (rv, uid, type, phase)
        self.binds: dict[tuple[str, str], int] = {}  # (pod uid, job version) -> first rv with a node

    def drain(self) -> None:
        while (ev := self.pg_watch.poll()) is not None:
            obj = ev["object"]
            meta = obj["metadata"]
            phase = (obj.get("status") or {}).get("phase") or ""
            self.podgroups.append((int(meta["resourceVersion"]), meta["uid"], ev["type"], phase))
        while (ev := self.pod_watch.poll()) is not None:
            obj = ev["object"]
            meta = obj["metadata"]
            if (obj.get("spec") or {}).get("nodeName"):
                version = (meta.get("annotations") or {}).get("volcano.sh/job-version", "")
                self.binds.setdefault((meta["uid"], version), int(meta["resourceVersion"]))

    def stop(self) -> None:
        self.pg_watch.stop()
        self.pod_watch.stop()


def test_a_restarted_jobs_new_podgroup_only_ever_shows_phases_of_its_own_sessions(k8s, kwok, k8s_namespace, tmp_path):
    ns = k8s_namespace
    api = k8s.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    history: History | None = None
    for node in core.list_node().items:
        core.delete_node(node.metadata.name)
    nodes = kwok_env.create_nodes(api, 3, cpu="5", memory="16Gi", pods="110", prefix=f"restart-{uuid.uuid4().hex[:4]}")
    # a small actuator: its watches then outnumber its appliers, as a pool sized for the actuator alone
    # (concurrency + 8) could not hold; the shutdown check below failed with that sizing
    up, _ = start_up(k8s, tmp_path, ns, "--schedule-period", "200ms", "--actuator-concurrency", "2")
    wait = Waiter(kwok, up, lambda: f"podgroups {history.podgroups if history else []}")
    try:
        kwok_env.wait_nodes_ready(api, nodes, timeout=DEADLINE, kwok=kwok)
        up.start()
        wait("default queue Open", lambda: queue_open(custom, "default"))
        history = History(api, ns)
        wait.drains.append(history.drain)
        job = mutate_job(seed_job())
        job["metadata"]["namespace"] = ns
        job["spec"]["maxRetry"] = RESTARTS + 1
        custom.create_namespaced_custom_object(G, V, ns, "jobs", job)

        def running(version: int):
            def check() -> bool:
                pods = [p for p in core.list_namespaced_pod(ns).items
                        if (p.metadata.annotations or {}).get("volcano.sh/job-version") == str(version)]
                phase = (custom.get_namespaced_custom_object(G, V, ns, "jobs", NAME).get("status") or {}).get("state", {})
                pg = history.podgroups[-1] if history.podgroups else (0, "", "", "")
                return (len(pods) == 3 and all(p.status.phase == "Running" and not p.metadata.deletion_timestamp
                                               for p in pods) and phase.get("phase") == "Running"
                        and pg[2] != "DELETED" and pg[3] == "Running")  # the restart then deletes a Running PodGroup
            return check

        wait("version 0 Running", running(0))
        for version in range(1, RESTARTS + 1):
            kwok_env.fail_pod(api, ns, f"{NAME}-worker-1", 1)
            wait(f"version {version} Running after the restart", running(version))
        history.drain()

        by_uid: dict[str, list[tuple[int, str, str]]] = {}
        for rv, uid, rtype, phase in sorted(history.podgroups):
            by_uid.setdefault(uid, []).append((rv, rtype, phase))
        assert len(by_uid) == RESTARTS + 1, by_uid  # one incarnation per job version
        inqueue_at: list[int] = []
        for uid, records in by_uid.items():
            phases = [phase for _, rtype, phase in records if rtype != "DELETED"]
            assert phases[0] in ("", "Pending"), (uid, records)  # a new PodGroup starts from nothing
            seen = [p for i, p in enumerate(phases) if p and (i == 0 or phases[i - 1] != p)]
            # its first phase is one its own first session computes: never the last one's Running or
            # Unknown (what a status computed for the deleted PodGroup wrote on it)
            assert seen and seen[0] in ("Pending", "Inqueue"), (uid, records)
            assert "Inqueue" in seen, (uid, records)
            assert "Running" not in seen or seen.index("Inqueue") < seen.index("Running"), (uid, records)
            inqueue_at.append(next(rv for rv, rtype, phase in records if phase == "Inqueue"))
        inqueue_at.sort()
        for (pod_uid, version), bound_rv in history.binds.items():
            assert bound_rv > inqueue_at[int(version)], (pod_uid, version, bound_rv, inqueue_at)
        print(f"podgroup incarnations: {[[p for _, _, p in r] for r in by_uid.values()]}")
        up.stop()  # SIGTERM: what it says while it shuts down is checked too
        said = up.log.read_text(errors="replace")
        # urllib3 discards a connection (and says so) when more threads use the client than its pool
        # holds: the actuator's concurrency plus a watch per bridged resource (issue 32 item 6)
        assert "Connection pool is full" not in said, up.tail()
    finally:
        cleanup(up, [history], api, nodes)
