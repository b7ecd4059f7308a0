"""A small vcjob life on a real API server, driven by plain API calls, for the recording tests.

The test plays the job controller (it creates the PodGroup and the pods vcbus
would, with `statemachines.manifests.podgroup.build_podgroup` / `statemachines.manifests.pod.build_pod`,
and writes the job's status), the scheduler (PodGroup Inqueue, pods bound) and
the kubelet (`tests.podsim`): both workers run, worker-1 fails with exit
code 1, a Command asks to abort the job, then everything is deleted. Every kind
a recording holds is created, modified and deleted at least once.

What a replay of a recording of it must decide: `PodFailed` of worker-1 ->
`RestartJob` (policy job[0]), then the Command -> `AbortJob`.
"""

from __future__ import annotations

from statemachines.manifests.pod import build_pod
from statemachines.manifests.podgroup import build_podgroup
from tests.podsim import PodSimulator
from vcbus.k8s.watching import api_request

JOB = "rec"
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{ns}/jobs"
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"
COMMANDS = "/apis/bus.volcano.sh/v1alpha1/namespaces/{ns}/commands"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
MERGE = "application/merge-patch+json"


def vcjob(queue: str) -> dict:
    template = {"spec": {"containers": [{"name": "main", "image": "busybox",
                                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                         "restartPolicy": "OnFailure"}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": JOB},
        "spec": {"minAvailable": 2, "queue": queue, "schedulerName": "volcano", "maxRetry": 3,
                 "policies": [{"events": ["PodFailed"], "action": "RestartJob"}],
                 "tasks": [{"name": "worker", "replicas": 2, "template": template}]},
    }


def drive(api, ns: str, on_step=None) -> dict:
    """Run the life; returns what it created: {"queue", "node", "pods"}.

    `on_step(name)` is called at "running" (both pods run) and "failed" (worker-1 failed)."""
    step = on_step or (lambda name: None)
    sim = PodSimulator(api)  # not KWOK: no vcbus scheduler runs, so the test binds and moves the PodGroup itself
    queue = f"q-{ns[-6:]}"
    node = f"rec-{ns[-6:]}"
    api_request(api, "POST", QUEUES, body={"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                           "metadata": {"name": queue}, "spec": {"weight": 1}})
    api_request(api, "PATCH", f"{QUEUES}/{queue}/status", content_type=MERGE, body={"status": {"state": "Open"}})
    sim.create_node(node, cpu="16", memory="64Gi")
    job = api_request(api, "POST", JOBS.format(ns=ns), body=vcjob(queue))
    job = api_request(api, "PATCH", f"{JOBS.format(ns=ns)}/{JOB}/status", content_type=MERGE,
                      body={"status": {"state": {"phase": "Pending"}, "minAvailable": 2}})
    pg = api_request(api, "POST", PODGROUPS.format(ns=ns), body=build_podgroup(job))
    sim.set_podgroup_phase(ns, pg["metadata"]["name"], "Inqueue")
    pods = []
    for i in range(2):
        pod = build_pod(job, "worker", i, version=0, retry_count=0)
        pods.append(api_request(api, "POST", f"/api/v1/namespaces/{ns}/pods", body=pod)["metadata"]["name"])
    for name in pods:
        sim.bind(name, node, namespace=ns)
        sim.start(name, namespace=ns)
    api_request(api, "PATCH", f"{JOBS.format(ns=ns)}/{JOB}/status", content_type=MERGE,
                body={"status": {"state": {"phase": "Running"}, "running": 2}})
    sim.set_podgroup_phase(ns, pg["metadata"]["name"], "Running")
    step("running")
    sim.fail(pods[1], 1, namespace=ns)
    step("failed")
    api_request(api, "POST", COMMANDS.format(ns=ns), body={
        "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command", "metadata": {"name": f"{JOB}-abort"},
        "action": "AbortJob",
        "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": JOB,
                   "uid": job["metadata"]["uid"], "controller": True}})
    api_request(api, "DELETE", f"{COMMANDS.format(ns=ns)}/{JOB}-abort")
    for name in pods:
        api_request(api, "DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", query={"gracePeriodSeconds": 0})
    api_request(api, "DELETE", f"{PODGROUPS.format(ns=ns)}/{pg['metadata']['name']}")
    api_request(api, "DELETE", f"{JOBS.format(ns=ns)}/{JOB}")
    sim.delete_node(node)
    api_request(api, "DELETE", f"{QUEUES}/{queue}")
    return {"queue": queue, "node": node, "pods": pods}
