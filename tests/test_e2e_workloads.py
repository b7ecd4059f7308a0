"""End to end: a Deployment, a StatefulSet and a plain pod with `schedulerName: volcano`, run by vcbus alone.

The setup of `tests/test_e2e_scheduler.py` (its `Scenario`, `Vcbus` and `scenario` fixture: a real
API server, KWOK nodes of cpu 5 / memory 16Gi, `vcbus up --kubeconfig` with its own bus). No vcjob:
vcbus's podgroup controller (statemachines/podgroups/) must give each workload a PodGroup and
annotate its pods, and vcbus's scheduler must then place them.

envtest runs no kube-controller-manager (the envtest binaries have none), so nothing turns the
Deployment into a ReplicaSet and pods, nor the StatefulSet into pods: the test creates them as
those controllers would, with the ownerReferences (`controller: true`, `blockOwnerDeletion: true`)
and labels they set. For the same reason no garbage collector deletes a PodGroup with its owner
here; the PodGroups' ownerReferences are checked instead.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.test_e2e_scheduler import SG, SV, scenario, three_sessions_bind_nothing  # noqa: F401 - a fixture
from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture
from vcbus.k8s.watching import api_request

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

GROUP_NAME = "scheduling.k8s.io/group-name"
REQUESTS = {"cpu": "1", "memory": "1Gi"}


def template(app: str, requests: dict | None = None) -> dict:
    requests = requests or REQUESTS
    return {"metadata": {"labels": {"app": app}},
            "spec": {"schedulerName": "volcano", "containers": [
                {"name": "main", "image": "busybox:1.36", "resources": {"requests": dict(requests),
                                                                         "limits": dict(requests)}}]}}


def controller_ref(owner) -> dict:
    return {"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.metadata.name,
            "uid": owner.metadata.uid, "controller": True, "blockOwnerDeletion": True}


def pod(name: str, app: str, owner, labels: dict, requests: dict | None = None) -> dict:
    t = template(app, requests)
    meta = {"name": name, "labels": {**t["metadata"]["labels"], **labels}}
    if owner is not None:
        meta["ownerReferences"] = [controller_ref(owner)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]}


@pytest.mark.parametrize("scenario", [2], indirect=True)
def test_a_deployment_a_statefulset_and_a_plain_pod_get_their_podgroups_and_run(scenario):
    sc = scenario
    ns = sc.ns
    apps = client.AppsV1Api(sc.api)
    sc.wait("default queue created and Open", sc.default_queue_open)

    selector = {"matchLabels": {"app": "web"}}
    deployment = apps.create_namespaced_deployment(ns, {"metadata": {"name": "web"}, "spec": {
        "replicas": 3, "selector": selector, "template": template("web")}})
    # what the Deployment controller makes: a ReplicaSet it controls ...
    rs_labels = {"pod-template-hash": "5d8f7c"}
    rs_template = template("web")
    rs_template["metadata"]["labels"].update(rs_labels)
    rs = apps.create_namespaced_replica_set(ns, {
        "metadata": {"name": "web-5d8f7c", "labels": rs_template["metadata"]["labels"],
                     "ownerReferences": [controller_ref(deployment)]},
        "spec": {"replicas": 3, "selector": {"matchLabels": rs_template["metadata"]["labels"]},
                 "template": rs_template}})
    # ... and the ReplicaSet controller: three pods it controls
    for suffix in ("a1b2c", "d3e4f", "g5h6i"):
        sc.core.create_namespaced_pod(ns, pod(f"web-5d8f7c-{suffix}", "web", rs, rs_labels))
    sts = apps.create_namespaced_stateful_set(ns, {"metadata": {"name": "db"}, "spec": {
        "replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": template("db")}})
    for i in range(2):  # what the StatefulSet controller makes
        sc.core.create_namespaced_pod(ns, pod(f"db-{i}", "db", sts, {
            "controller-revision-hash": "db-7b9c", "statefulset.kubernetes.io/pod-name": f"db-{i}"}))
    sc.core.create_namespaced_pod(ns, pod("solo", "solo", None, {}))

    def pods() -> list[dict]:
        return api_request(sc.api, "GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []

    def podgroups() -> dict[str, dict]:
        items = sc.custom.list_namespaced_custom_object(SG, SV, ns, "podgroups")["items"]
        return {pg["metadata"]["name"]: pg for pg in items}

    def all_running():
        ps, pgs = pods(), podgroups()
        ok = len(ps) == 6 and all(
            (p["metadata"].get("annotations") or {}).get(GROUP_NAME) in pgs and p["spec"].get("nodeName")
            and p["status"].get("phase") == "Running" for p in ps)
        ok = ok and len(pgs) == 3 and all((pg.get("status") or {}).get("phase") == "Running" for pg in pgs.values())
        return (ps, pgs) if ok else None

    ps, pgs = sc.wait("6 pods annotated, bound and Running; their 3 PodGroups Running", all_running)
    solo_uid = next(p["metadata"]["uid"] for p in ps if p["metadata"]["name"] == "solo")
    owners = {name: [(r["kind"], r["name"], r["uid"]) for r in pg["metadata"]["ownerReferences"]]
              for name, pg in pgs.items()}
    assert owners == {
        f"podgroup-{rs.metadata.uid}": [("ReplicaSet", "web-5d8f7c", rs.metadata.uid)],
        f"podgroup-{sts.metadata.uid}": [("StatefulSet", "db", sts.metadata.uid)],
        f"podgroup-{solo_uid}": [("Pod", "solo", solo_uid)],
    }
    expected_group = {"web": f"podgroup-{rs.metadata.uid}", "db": f"podgroup-{sts.metadata.uid}",
                      "solo": f"podgroup-{solo_uid}"}
    assert {p["metadata"]["name"]: p["metadata"]["annotations"][GROUP_NAME] for p in ps} == {
        p["metadata"]["name"]: expected_group[p["metadata"]["labels"]["app"]] for p in ps}
    for pg in pgs.values():
        assert pg["spec"]["minMember"] == 1 and pg["spec"]["queue"] == "default", pg["spec"]
        assert pg["spec"]["minResources"]["requests.cpu"] == "1", pg["spec"]
    assert {p["spec"]["nodeName"] for p in ps} <= set(sc.nodes)
    print(f"placement: {sorted((p['metadata']['name'], p['spec']['nodeName']) for p in ps)}")


@pytest.mark.parametrize("scenario", [2], indirect=True)
def test_a_deployment_with_the_min_member_annotation_is_a_gang_never_bound_where_it_cannot_all_fit(
        scenario, nats_server):
    """`scheduling.volcano.sh/group-min-member: "3"` on a Deployment (the Deployment controller copies
    its annotations onto its ReplicaSet; the test makes that ReplicaSet, as in the test above): its
    PodGroup has minMember 3 and three pods' resources, and on two nodes where only two of its pods
    fit (3 cpu each, 5 per node) none is bound, as with Volcano's podgroup controller and scheduler."""
    sc = scenario
    ns = sc.ns
    apps = client.AppsV1Api(sc.api)
    sc.wait("default queue created and Open", sc.default_queue_open)
    big = {"cpu": "3", "memory": "1Gi"}
    notes = {"scheduling.volcano.sh/group-min-member": "3", "volcano.sh/owner-note": "kept"}
    deployment = apps.create_namespaced_deployment(ns, {"metadata": {"name": "gang", "annotations": notes}, "spec": {
        "replicas": 3, "selector": {"matchLabels": {"app": "gang"}}, "template": template("gang", big)}})
    rs_labels = {"pod-template-hash": "6c9d4f"}
    rs_template = template("gang", big)
    rs_template["metadata"]["labels"].update(rs_labels)
    rs = apps.create_namespaced_replica_set(ns, {
        "metadata": {"name": "gang-6c9d4f", "labels": rs_template["metadata"]["labels"], "annotations": notes,
                     "ownerReferences": [controller_ref(deployment)]},
        "spec": {"replicas": 3, "selector": {"matchLabels": rs_template["metadata"]["labels"]},
                 "template": rs_template}})
    for suffix in ("k2m4p", "q6r8s", "t1v3w"):
        sc.core.create_namespaced_pod(ns, pod(f"gang-6c9d4f-{suffix}", "gang", rs, rs_labels, big))
    name = f"podgroup-{rs.metadata.uid}"

    def pods() -> list[dict]:
        return api_request(sc.api, "GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []

    def unschedulable():
        pgs = sc.custom.list_namespaced_custom_object(SG, SV, ns, "podgroups")["items"]
        pg = next((x for x in pgs if x["metadata"]["name"] == name), None)
        if pg is None or len([p for p in pods() if (p["metadata"].get("annotations") or {}).get(GROUP_NAME) == name]) < 3:
            return None
        cond = next((c for c in (pg.get("status") or {}).get("conditions") or [] if c.get("type") == "Unschedulable"),
                    None)
        return (pg, cond) if cond else None

    pg, cond = sc.wait("the gang's PodGroup, its 3 pods annotated, Unschedulable", unschedulable)
    assert pg["spec"]["minMember"] == 3, pg["spec"]
    assert pg["spec"]["minResources"]["requests.cpu"] == "9" and pg["spec"]["minResources"]["pods"] == "3", pg["spec"]
    assert pg["metadata"]["annotations"] == {"volcano.sh/owner-note": "kept"}
    assert cond["status"] == "True" and cond["reason"] == "NotEnoughResources", cond
    assert pg["status"]["phase"] == "Inqueue"  # enqueue admits on cluster totals (10 cpu >= 9)

    three_sessions_bind_nothing(sc, nats_server.url, pods, 3)  # and no BindPod decided
    print(f"PodGroup {name}: spec {pg['spec']}; condition {cond}")


@pytest.mark.parametrize("scenario", [2], indirect=True)
def test_a_batch_jobs_pods_get_one_podgroup_with_the_jobs_annotations_and_run(scenario):
    """A batch/v1 Job annotated `scheduling.volcano.sh/group-min-member: "2"` (Volcano's pg-controller reads
    a `Job` owner's annotations: getAnnotationsFromUpperRes, case "Job"): its two pods (made by the test,
    as the Job controller would) share `podgroup-<the Job's uid>` of minMember 2, owned as the pods are,
    with the Job's volcano.sh/ annotation, and run on the KWOK nodes."""
    sc = scenario
    ns = sc.ns
    sc.wait("default queue created and Open", sc.default_queue_open)
    notes = {"scheduling.volcano.sh/group-min-member": "2", "volcano.sh/owner-note": "from-the-job"}
    spec = template("pi")["spec"] | {"restartPolicy": "Never"}
    job = client.BatchV1Api(sc.api).create_namespaced_job(ns, {"metadata": {"name": "pi", "annotations": notes},
                                                               "spec": {"parallelism": 2, "completions": 2,
                                                                        "template": {"spec": spec}}})
    labels = {"batch.kubernetes.io/controller-uid": job.metadata.uid, "batch.kubernetes.io/job-name": "pi",
              "controller-uid": job.metadata.uid, "job-name": "pi"}
    for suffix in ("x7k2p", "m4q9z"):
        body = pod(f"pi-{suffix}", "pi", job, labels)
        body["spec"]["restartPolicy"] = "Never"
        sc.core.create_namespaced_pod(ns, body)
    name = f"podgroup-{job.metadata.uid}"

    def running():
        ps = api_request(sc.api, "GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []
        pgs = sc.custom.list_namespaced_custom_object(SG, SV, ns, "podgroups")["items"]
        pg = next((x for x in pgs if x["metadata"]["name"] == name), None)
        ok = pg is not None and len(ps) == 2 and all(
            (p["metadata"].get("annotations") or {}).get(GROUP_NAME) == name and p["status"].get("phase") == "Running"
            for p in ps)
        return (pg, ps, pgs) if ok else None

    pg, ps, pgs = sc.wait("the Job's 2 pods annotated with its one PodGroup and Running", running)
    assert len(pgs) == 1
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["minResources"]["requests.cpu"] == "2", pg["spec"]
    assert pg["metadata"]["annotations"] == {"volcano.sh/owner-note": "from-the-job"}
    assert [(r["apiVersion"], r["kind"], r["name"], r["uid"]) for r in pg["metadata"]["ownerReferences"]] == [
        ("batch/v1", "Job", "pi", job.metadata.uid)]
    assert {p["spec"]["nodeName"] for p in ps} <= set(sc.nodes)
