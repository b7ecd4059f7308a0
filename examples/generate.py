"""Regenerate the example watch logs in this folder (deterministic; run from the repo root).

    .venv/bin/python examples/generate.py

Each log is what `kubectl get vcjob,pods,podgroups,queues,commands -A --watch
--output-watch-events -o json` prints while a scenario runs, recorded on
vcbus's simulated cluster (`tools.simulate`): the API server, the scheduler and
the kubelets are simulated; the controller's status writes are those vcbus
decides, written the way Volcano writes them. No real Volcano cluster was
available to record them (see docs/fidelity.md).
"""

from __future__ import annotations

import copy
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tools.simulate import SimCluster  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
NS = "default"

SEED_JOB = {
    "metadata": {"name": "resnet-dist-train"},
    "spec": {
        "minAvailable": 3,
        "schedulerName": "volcano",
        "policies": [{"events": ["PodEvicted", "PodFailed"], "action": "RestartJob"}],
        "plugins": {
            "pytorch": ["--master=master", "--worker=worker", "--port=23456"],
            "status-mounter": ["-statusJson=true", "-mountPoint=/status", "-values=retryCount,pending,running"],
        },
        "tasks": [
            {
                "replicas": 1,
                "name": "master",
                "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "image": "gcr.io/kubeflow-ci/pytorch-dist-sendrecv-test:1.0",
                                "imagePullPolicy": "IfNotPresent",
                                "name": "master",
                            }
                        ],
                        "restartPolicy": "OnFailure",
                    }
                },
            },
            {
                "replicas": 2,
                "name": "worker",
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "image": "gcr.io/kubeflow-ci/pytorch-dist-sendrecv-test:1.0",
                                "imagePullPolicy": "IfNotPresent",
                                "name": "worker",
                                "workingDir": "/home",
                            }
                        ],
                        "restartPolicy": "OnFailure",
                    }
                },
            },
        ],
    },
}


def simple_job(name: str, *, replicas: int = 2, policies=None, task_policies=None, max_retry: int = 3) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "maxRetry": max_retry,
            "policies": policies or [],
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "policies": task_policies or [],
                    "template": {
                        "spec": {
                            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "600"]}],
                            "restartPolicy": "Never",
                        }
                    },
                }
            ],
        },
    }


def start(c: SimCluster, job: dict) -> str:
    name = job["metadata"]["name"]
    c.create_job(job)
    c.settle()
    c.tick(2)
    c.schedule(NS, name)
    c.settle()
    c.tick(3)
    for p in c.pods_of(NS, name):
        c.bind(p)
        c.settle()
        c.tick(1)
    return name


def run_all(c: SimCluster, name: str) -> None:
    for p in c.pods_of(NS, name):
        if p["status"]["phase"] == "Pending" and "deletionTimestamp" not in p["metadata"]:
            c.run(p)
            c.settle()
            c.tick(1)


def pod(c: SimCluster, name: str) -> dict:
    p = c.get("Pod", NS, name)
    assert p is not None, name
    return p


def seed(c: SimCluster) -> None:
    """The user's job: worker-1 fails, RestartJob, pods recreated, master succeeds, Completed."""
    name = start(c, copy.deepcopy(SEED_JOB))
    c.tick(20)
    run_all(c, name)
    c.tick(300)
    c.fail(pod(c, f"{name}-worker-1"), 1)
    c.settle()
    c.tick(5)
    c.schedule(NS, name)
    c.settle()
    c.tick(3)
    for p in c.pods_of(NS, name):
        c.bind(p)
        c.settle()
    c.tick(15)
    run_all(c, name)
    c.tick(600)
    c.succeed(pod(c, f"{name}-master-0"))
    c.settle()


def retries_exhausted(c: SimCluster) -> None:
    """maxRetry 3: the third restart ends Failed (maxRetry counts attempts)."""
    name = start(c, simple_job("flaky", policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    for attempt in range(3):
        c.tick(10)
        run_all(c, name)
        c.tick(60)
        c.fail(pod(c, f"{name}-worker-0"), 137)
        c.settle()
        if attempt < 2:
            c.tick(5)
            c.schedule(NS, name)
            c.settle()
            for p in c.pods_of(NS, name):
                c.bind(p)
                c.settle()


def abort_resume(c: SimCluster) -> None:
    """vcctl job suspend / resume: Commands AbortJob then ResumeJob."""
    name = start(c, simple_job("suspendable"))
    c.tick(10)
    run_all(c, name)
    c.tick(120)
    c.issue_command(NS, name, "AbortJob")
    c.settle()
    c.tick(300)
    c.issue_command(NS, name, "ResumeJob")
    c.settle()
    c.tick(5)
    c.schedule(NS, name)
    c.settle()
    for p in c.pods_of(NS, name):
        c.bind(p)
        c.settle()
    c.tick(10)
    run_all(c, name)
    c.tick(100)
    for p in c.pods_of(NS, name):
        c.succeed(p)
        c.settle()
        c.tick(1)


def pending_timeout(c: SimCluster) -> None:
    """A pod stuck Pending: `{event: PodPending, timeout: 5m, action: RestartPod}` restarts it."""
    job = simple_job("stuck", task_policies=[{"event": "PodPending", "timeout": "5m", "action": "RestartPod"}])
    name = start(c, job)
    c.tick(10)
    c.run(pod(c, f"{name}-worker-0"))
    c.settle()
    for _ in range(7):  # worker-1 never starts; the log goes on (the other pod's updates)
        c.tick(60)
        p = pod(c, f"{name}-worker-0")
        p["status"]["containerStatuses"][0]["restartCount"] = 0
        p["status"]["conditions"][0]["lastTransitionTime"] = c.now
        c._put("MODIFIED", "Pod", p)
        c.settle()
    c.tick(5)
    for p in c.pods_of(NS, name):
        if p["status"]["phase"] == "Pending":
            c.bind(p)
            c.settle()
            c.run(p)
            c.settle()


SCENARIOS = {
    "resnet-dist-train.json": (seed, True),
    "retries-exhausted.jsonl": (retries_exhausted, False),
    "abort-resume.jsonl": (abort_resume, False),
    "pending-timeout.jsonl": (pending_timeout, False),
}


def generate(filename: str) -> bytes:
    scenario, pretty = SCENARIOS[filename]
    chunks: list[bytes] = []
    c = SimCluster(write=chunks.append, pretty=pretty)
    c.add_queue("default")
    c.settle()
    c.tick(30)
    scenario(c)
    return b"".join(chunks)


def main() -> None:
    for filename in SCENARIOS:
        (HERE / filename).write_bytes(generate(filename))
        print(f"wrote examples/{filename}")


if __name__ == "__main__":
    main()
