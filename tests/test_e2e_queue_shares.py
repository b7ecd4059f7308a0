"""Queue weights when jobs arrive together, and Volcano's events, on a real API server and KWOK nodes
(issue 32, items 2 and 4).

`vcbus up --kubeconfig` as a child process (its own nats-server, bridge, decider, scheduler,
projector, actuator), KWOK as the kubelets of 4 fake nodes of 4 cpu (16 cpu), the
`--schedule-period` of the issue's runs (200 ms and 1 s). Queues `q1` (weight 1) and `q3`
(weight 3); four vcjobs per queue of 4 x 1 cpu pods with minAvailable 1, all created at once.
Volcano runs 4 pods of q1 and 12 of q3, every run; vcbus did 12/4, 14/2, 6/10, 11/5, as its
actuator happened to create one queue's pods before the other's. Checked: exactly 16 pods bound,
4 of q1 and 12 of q3, and still so after three more sessions.

The events, as Volcano writes them: every bound pod gets the binder's Normal `Scheduled`
"Successfully assigned <ns>/<pod> to <node>" (source vc-scheduler, on that pod's uid); a vcjob
in q3 whose one 5 cpu pod fits no node gets the job controller's Warning `PodGroupPending`
"PodGroup <ns>:<job> unschedulable, reason: <the condition's message>" at a sync after its
PodGroup's Unschedulable condition (the test touches the pod's labels once the condition shows:
the pod's own condition write, which also makes Volcano sync, may land before the PodGroup's).

Not timed: every step waits on a condition with a generous deadline.
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from tests import kwok_env
from tests.kwok_up import DEADLINE, SG, SV, Waiter, cleanup, queue_open, start_up
from tests.test_kwok_gang import G, V, Watch, metric

pytestmark = [pytest.mark.k8s, pytest.mark.slow]

NODES, NODE = 4, {"cpu": "4", "memory": "16Gi", "pods": "110"}
JOBS_PER_QUEUE, REPLICAS = 4, 4
BIG = "too-big"  # one pod of 5 cpu: fits no node


def vcjob(name: str, ns: str, queue: str, replicas: int, cpu: str, min_available: int = 1) -> dict:
    """A vcjob as Volcano's admission webhook leaves it (task minAvailable defaulted to its replicas)."""
    return {
        "apiVersion": f"{G}/{V}", "kind": "Job", "metadata": {"name": name, "namespace": ns},
        "spec": {
            "schedulerName": "volcano", "minAvailable": min_available, "queue": queue, "maxRetry": 3,
            "tasks": [{
                "name": "worker", "replicas": replicas, "minAvailable": replicas, "maxRetry": 3,
                "template": {"spec": {
                    "schedulerName": "volcano", "restartPolicy": "Never",
                    "containers": [{"name": "worker", "image": "busybox:1.36",
                                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"},
                                                  "limits": {"cpu": cpu, "memory": "1Gi"}}}],
                }},
            }],
        },
    }


@pytest.mark.parametrize("period", ["200ms", "1s"])
def test_weights_hold_when_jobs_arrive_together_and_volcanos_events_are_written(k8s, kwok, k8s_namespace,
                                                                                 tmp_path, period):
    ns = k8s_namespace
    api = k8s.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    tag = uuid.uuid4().hex[:4]
    queues = {f"q1-{tag}": 1, f"q3-{tag}": 3}
    q1, q3 = queues
    jobs = {f"{q.split('-')[0]}-job-{j}": q for q in queues for j in range(JOBS_PER_QUEUE)}
    watch: Watch | None = None

    def per_queue() -> dict[str, int]:
        out = dict.fromkeys(queues, 0)
        if watch is not None:
            for job, q in jobs.items():
                out[q] += sum(1 for n in watch.job_pods(job) if n in watch.bound)
        return out

    for node in core.list_node().items:  # other modules' fake nodes would count in the cluster's total
        core.delete_node(node.metadata.name)
    for name, weight in queues.items():
        custom.create_cluster_custom_object(SG, SV, "queues", {
            "apiVersion": f"{SG}/{SV}", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": weight, "reclaimable": True}})
    nodes = kwok_env.create_nodes(api, NODES, prefix=f"kwok-shares-{tag}", **NODE)
    up, metrics_addr = start_up(k8s, tmp_path, ns, "--schedule-period", period)
    wait = Waiter(kwok, up, lambda: f"bound per queue {per_queue()}")
    try:
        kwok_env.wait_nodes_ready(api, nodes, timeout=DEADLINE, kwok=kwok)
        up.start()
        wait("both queues Open", lambda: all(queue_open(custom, q) for q in queues))
        watch = Watch(api, ns)
        wait.drains.append(watch.drain)
        for name, q in jobs.items():  # all at once
            custom.create_namespaced_custom_object(G, V, ns, "jobs", vcjob(name, ns, q, REPLICAS, "1"))
        custom.create_namespaced_custom_object(G, V, ns, "jobs", vcjob(BIG, ns, q3, 1, "5"))

        wait("16 pods bound", lambda: len(watch.bound) >= NODES * int(NODE["cpu"]))
        scheduling = client.SchedulingV1Api(api)
        for i in range(3):  # three more sessions, each after a change nobody uses: nothing moves
            sessions = metric(metrics_addr, "vcbus_scheduler_sessions_total")
            nudge = f"shares-nudge-{tag}-{i}"
            scheduling.create_priority_class({"metadata": {"name": nudge}, "value": 7, "globalDefault": False})
            try:
                wait(f"scheduling session {i + 1} after the 16 binds",
                     lambda s=sessions: metric(metrics_addr, "vcbus_scheduler_sessions_total") > s)
            finally:
                scheduling.delete_priority_class(nudge)
        watch.drain()
        per_job = {job: sorted(n for n in watch.job_pods(job) if n in watch.bound) for job in jobs}
        assert per_queue() == {q1: 4, q3: 12}, (per_job, up.tail())
        assert len(watch.bound) == 16

        # Scheduled on every bound pod, as Volcano's binder writes it
        def scheduled_events() -> dict[str, client.CoreV1Event]:
            got = {}
            for e in core.list_namespaced_event(ns).items:
                if e.reason == "Scheduled" and e.involved_object.kind == "Pod":
                    got[e.involved_object.name] = e
            return got if set(got) >= set(watch.bound) else {}

        events = wait("a Scheduled event on every bound pod", scheduled_events)
        for pod_name, (_, node) in watch.bound.items():
            e = events[pod_name]
            assert (e.type, e.message, e.source.component) == (
                "Normal", f"Successfully assigned {ns}/{pod_name} to {node}", "vc-scheduler")
            assert e.involved_object.uid == watch.pod[pod_name]["metadata"]["uid"]
        assert set(events) == set(watch.bound)  # none for a pod that was not bound

        # PodGroupPending on the vcjob whose PodGroup is Unschedulable
        def big_unschedulable() -> str:
            st = (watch.pg.get(BIG) or {}).get("status") or {}
            cond = [c for c in st.get("conditions") or [] if c.get("type") == "Unschedulable" and c.get("status") == "True"]
            return cond[0].get("message", "") if cond and watch.job_pods(BIG) else ""

        message = wait(f"{BIG}: PodGroup Unschedulable", big_unschedulable)
        [pod_name] = watch.job_pods(BIG)
        core.patch_namespaced_pod(pod_name, ns, {"metadata": {"labels": {"nudge": "1"}}})  # one more sync

        def pending_event():
            for e in core.list_namespaced_event(ns).items:
                if e.reason == "PodGroupPending" and e.involved_object.name == BIG:
                    return e
            return None

        event = wait(f"{BIG}: PodGroupPending on the vcjob", pending_event)
        assert (event.type, event.involved_object.kind, event.source.component) == (
            "Warning", "Job", "vc-controller-manager")
        # the condition's text as the sync saw it (sessions refine it: "Origin reason is ..." when the
        # session tried the pod)
        gang = "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable"
        assert message.startswith(gang), message
        assert event.message.startswith(f"PodGroup {ns}:{BIG} unschedulable, reason: {gang}"), event.message
        print(f"period {period}: bound per queue {per_queue()}; {len(events)} Scheduled events; {event.message}")
    finally:
        cleanup(up, [watch], api, nodes)
        for name in queues:
            try:
                custom.delete_cluster_custom_object(SG, SV, "queues", name)
            except client.ApiException:
                pass
