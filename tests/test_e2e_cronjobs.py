"""End to end: Volcano's CronJob run by `vcbus up` alone, on a real API server with KWOK nodes.

The setup of `tests/test_e2e_scheduler.py` (its `scenario` fixture: KWOK nodes, `vcbus up
--kubeconfig` with its own bus, the admission webhook for this namespace). A CronJob `@every 5s`
(the shortest schedule Volcano's webhook accepts is any robfig descriptor; `@every 5s` is the
issue's) with `successfulJobsHistoryLimit: 1`:

- vcbus's cronjob controller creates its first run, a vcjob named as Volcano names it
  (`<cronjob>-<scheduled minute>`, so a 5 s schedule gives one run a minute: the other ticks of a
  minute find their run made) and controlled by the CronJob; the status gets `active` and
  `lastScheduleTime`;
- vcbus's job controller and scheduler run it on the KWOK nodes; the test ends its pod as its
  kubelet would, the vcjob is Completed, it leaves `active` and `lastSuccessfulTime` is written;
- the next minute's run is created and completed the same way, and the history limit prunes the
  first run (deleted by vcbus, only it).
"""

from __future__ import annotations

import pytest

from statemachines import outputs as o
from tests import kwok_env, kwok_up
from tests.test_e2e_scheduler import G, V, bus_outputs, scenario  # noqa: F401 - a fixture
from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture
from vcbus.bus import subjects as s

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

NAME = "tick"
POD_SPEC = {"containers": [{"name": "main", "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                          "limits": {"cpu": "1", "memory": "1Gi"}}}]}


def cronjob() -> dict:
    return {"apiVersion": f"{G}/{V}", "kind": "CronJob", "metadata": {"name": NAME},
            "spec": {"schedule": "@every 5s", "concurrencyPolicy": "Allow", "successfulJobsHistoryLimit": 1,
                     "jobTemplate": {"metadata": {"labels": {"app": NAME}},
                                     "spec": {"minAvailable": 1, "schedulerName": "volcano",
                                              "tasks": [{"name": "t", "replicas": 1, "template": {"spec": POD_SPEC}}]}}}}


@pytest.mark.parametrize("scenario", [2], indirect=True)
def test_a_cronjob_every_5s_makes_runs_that_complete_and_the_history_limit_prunes_them(scenario, nats_server):
    sc = scenario
    sc.wait("default queue created and Open", sc.default_queue_open)
    cj = sc.custom.create_namespaced_custom_object(G, V, sc.ns, "cronjobs", cronjob())
    cj_uid = cj["metadata"]["uid"]

    def get_cronjob() -> dict:
        return sc.custom.get_namespaced_custom_object(G, V, sc.ns, "cronjobs", NAME)

    def runs() -> dict[str, dict]:
        items = sc.custom.list_namespaced_custom_object(G, V, sc.ns, "jobs")["items"]
        return {j["metadata"]["name"]: j for j in items
                if any(r.get("uid") == cj_uid and r.get("controller") for r in j["metadata"].get("ownerReferences") or [])
                and not j["metadata"].get("deletionTimestamp")}

    def run_to_completion(name: str) -> dict:
        pod = f"{name}-t-0"
        sc.wait(f"{pod} bound and Running", lambda: kwok_up.running_on(sc.core, sc.ns, pod, sc.nodes))
        kwok_env.succeed_pod(sc.api, sc.ns, pod)

        def completed():
            job = runs().get(name)
            return job if job and ((job.get("status") or {}).get("state") or {}).get("phase") == "Completed" else None

        return sc.wait(f"{name} Completed", completed)

    first = sc.wait("the first run", lambda: sorted(runs()))[0]
    assert first.startswith(f"{NAME}-") and first[len(NAME) + 1:].isdigit()
    made = runs()[first]
    assert made["metadata"]["labels"]["app"] == NAME
    scheduled = made["metadata"]["annotations"]["volcano.sh/cronjob-scheduled-timestamp"]
    assert int(first[len(NAME) + 1:]) * 60 <= _unix(scheduled) < int(first[len(NAME) + 1:]) * 60 + 60

    def active_is(names: list[str]):
        def check():
            status = get_cronjob().get("status") or {}
            return status if sorted(r["name"] for r in status.get("active") or []) == names else None
        return check

    status = sc.wait(f"status.active = [{first}]", active_is([first]))
    assert status["lastScheduleTime"] == scheduled and status["active"][0]["uid"] == made["metadata"]["uid"]
    done = run_to_completion(first)
    def finished():
        status = get_cronjob().get("status") or {}
        return status if not status.get("active") and status.get("lastSuccessfulTime") else None

    status = sc.wait("status.active empty and lastSuccessfulTime after the run", finished)
    assert status["lastSuccessfulTime"] == done["status"]["state"]["lastTransitionTime"]

    second = sc.wait("the next minute's run", lambda: [n for n in sorted(runs()) if n != first])[0]
    assert int(second[len(NAME) + 1:]) > int(first[len(NAME) + 1:])
    run_to_completion(second)
    sc.wait(f"{first} pruned (successfulJobsHistoryLimit 1)", lambda: first not in runs() and second in runs())

    cmds = [x for _, x in bus_outputs(nats_server.url, s.CMDS_STREAM) if x.job == f"{sc.ns}/cronjob:{NAME}"]
    creates = [x.name for x in cmds if isinstance(x, o.CreateCronJobRun)]
    assert creates[:2] == [first, second] and len(set(creates)) == len(creates), creates
    assert [(x.name, x.uid) for x in cmds if isinstance(x, o.DeleteCronJobRun)][:1] == [
        (first, made["metadata"]["uid"])]
    events = [x for _, x in bus_outputs(nats_server.url, s.JOBS_STREAM) if x.job == f"{sc.ns}/cronjob:{NAME}"]
    moves = [(x.run, x.to_state) for x in events if isinstance(x, o.CronJobRunChanged)]
    assert [(first, "Created"), (first, "Active"), (first, "Succeeded")] == [m for m in moves if m[0] == first][:3]
    assert (first, "Pruned") in moves, moves


def _unix(rfc3339: str) -> int:
    import datetime as dt

    return int(dt.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp())
