"""End to end: Volcano's JobFlow run by `vcbus up` alone, on a real API server with KWOK nodes.

The setup of `tests/test_e2e_scheduler.py` (its `scenario` fixture: KWOK nodes, `vcbus up
--kubeconfig` with its own bus, the admission webhook for this namespace). Three JobTemplates and a
JobFlow `prepare -> train -> report` (each flow depends on the one before):

- vcbus's jobflow controller creates `flow-prepare` only (the others wait), controlled by the JobFlow
  and labelled as Volcano labels it; vcbus's job controller and scheduler run it on the KWOK nodes;
  the test ends its pod as its kubelet would;
- only once `flow-prepare` is Completed is `flow-train` created, then `flow-report`: the creation
  times are in the flows' order, each after the one before completed;
- the JobFlow's status ends `Succeed` with the three vcjobs in `completedJobs`, each with its
  running history; the JobTemplates list the vcjob made from them.
"""

from __future__ import annotations

import pytest

from statemachines import outputs as o
from tests import kwok_env, kwok_up
from tests.test_e2e_scheduler import G, V, bus_outputs, scenario  # noqa: F401 - a fixture
from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture
from vcbus.bus import subjects as s

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

F = "flow.volcano.sh"
FLOWS = ("prepare", "train", "report")
POD_SPEC = {"containers": [{"name": "main", "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                          "limits": {"cpu": "1", "memory": "1Gi"}}}]}


def template(name: str) -> dict:
    return {"apiVersion": f"{F}/{V}", "kind": "JobTemplate", "metadata": {"name": name},
            "spec": {"minAvailable": 1, "schedulerName": "volcano",
                     "tasks": [{"name": "t", "replicas": 1, "template": {"spec": POD_SPEC}}]}}


def jobflow() -> dict:
    flows, before = [], None
    for name in FLOWS:
        flows.append({"name": name, **({"dependsOn": {"targets": [before]}} if before else {})})
        before = name
    return {"apiVersion": f"{F}/{V}", "kind": "JobFlow", "metadata": {"name": "flow"},
            "spec": {"jobRetainPolicy": "retain", "flows": flows}}


@pytest.mark.parametrize("scenario", [2], indirect=True)
def test_a_jobflow_of_three_jobs_runs_them_in_order_and_succeeds(scenario, nats_server):
    sc = scenario
    sc.wait("default queue created and Open", sc.default_queue_open)
    for name in FLOWS:
        sc.custom.create_namespaced_custom_object(F, V, sc.ns, "jobtemplates", template(name))
    flow = sc.custom.create_namespaced_custom_object(F, V, sc.ns, "jobflows", jobflow())
    flow_uid = flow["metadata"]["uid"]

    def jobs() -> dict[str, dict]:
        items = sc.custom.list_namespaced_custom_object(G, V, sc.ns, "jobs")["items"]
        return {j["metadata"]["name"]: j for j in items
                if any(r.get("uid") == flow_uid and r.get("controller") for r in j["metadata"].get("ownerReferences") or [])}

    def phase(job: dict) -> str:
        return ((job.get("status") or {}).get("state") or {}).get("phase", "")

    def run_to_completion(name: str) -> dict:
        pod = f"{name}-t-0"
        sc.wait(f"{pod} bound and Running", lambda: kwok_up.running_on(sc.core, sc.ns, pod, sc.nodes))
        assert sorted(jobs()) == sorted(seen), f"a later flow's vcjob was made before {name} completed"
        kwok_env.succeed_pod(sc.api, sc.ns, pod)
        return sc.wait(f"{name} Completed", lambda: (j := jobs().get(name)) and phase(j) == "Completed" and j)

    seen: list[str] = []
    completed_at: dict[str, str] = {}
    for name in FLOWS:
        job_name = f"flow-{name}"
        made = sc.wait(f"{job_name} created", lambda n=job_name: jobs().get(n))
        seen.append(job_name)
        assert made["metadata"]["labels"] == {"volcano.sh/createdByJobTemplate": f"{sc.ns}.{name}",
                                              "volcano.sh/createdByJobFlow": f"{sc.ns}.flow"}
        if completed_at:  # created only after the flow it depends on completed
            assert made["metadata"]["creationTimestamp"] >= completed_at[seen[-2]]
        done = run_to_completion(job_name)
        completed_at[job_name] = done["status"]["state"]["lastTransitionTime"]

    def succeeded():
        status = sc.custom.get_namespaced_custom_object(F, V, sc.ns, "jobflows", "flow").get("status") or {}
        return status if (status.get("state") or {}).get("phase") == "Succeed" else None

    status = sc.wait("the JobFlow Succeed", succeeded)
    assert status["completedJobs"] == sorted(seen)
    assert {js["name"]: js["state"] for js in status["jobStatusList"]} == dict.fromkeys(seen, "Completed")
    assert all(js["runningHistories"][-1]["state"] == "Completed" for js in status["jobStatusList"])
    assert set(status["conditions"]) == set(seen)
    listed = sc.wait("the JobTemplates list their vcjob", lambda: all(
        (sc.custom.get_namespaced_custom_object(F, V, sc.ns, "jobtemplates", n).get("status") or {}).get(
            "jobDependsOnList") == [f"flow-{n}"] for n in FLOWS))
    assert listed

    events = [x for _, x in bus_outputs(nats_server.url, s.JOBS_STREAM) if x.job == f"{sc.ns}/jobflow:flow"]
    assert [x.to_state for x in events if isinstance(x, o.JobFlowStateChanged)] == ["Pending", "Running", "Succeed"]
    cmds = [x for _, x in bus_outputs(nats_server.url, s.CMDS_STREAM) if x.job == f"{sc.ns}/jobflow:flow"]
    assert [x.name for x in cmds if isinstance(x, o.CreateJobFlowJob)] == seen
