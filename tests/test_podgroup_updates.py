"""createOrUpdatePodGroup (§6.3): a spec change updates minMember/minTaskMember of the PodGroup."""

from __future__ import annotations

from statemachines import outputs as o
from tools.simulate import SimCluster

JOB = {
    "metadata": {"name": "scaler"},
    "spec": {
        "minAvailable": 2,
        "tasks": [
            {
                "name": "worker",
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
            }
        ],
    },
}


def _running_cluster() -> SimCluster:
    c = SimCluster()
    c.add_queue()
    c.create_job(JOB)
    c.settle()
    c.schedule("default", "scaler")
    c.settle()
    for p in c.pods_of("default", "scaler"):
        c.run(p)
        c.settle()
    return c


def test_scale_up_updates_the_podgroup_and_creates_the_new_replica():
    c = _running_cluster()
    before = len(c.outputs)
    job = c.get("Job", "default", "scaler")
    job["spec"]["tasks"][0]["replicas"] = 3
    job["spec"]["tasks"][0]["minAvailable"] = 3
    job["spec"]["minAvailable"] = 3
    c._put("MODIFIED", "Job", job)
    c.settle()
    new = c.outputs[before:]
    updates = [x for x in new if isinstance(x, o.UpdatePodGroup)]
    assert len(updates) == 1
    assert updates[0].min_member == 3 and updates[0].min_task_member == {"worker": 3}
    created = [x.name for x in new if isinstance(x, o.CreatePod)]
    assert created == ["scaler-worker-2"]


def test_scale_down_deletes_surplus_pods_unannotated_so_they_come_back_as_evictions():
    c = _running_cluster()
    before = len(c.outputs)
    job = c.get("Job", "default", "scaler")
    job["spec"]["tasks"][0]["replicas"] = 1
    job["spec"]["tasks"][0]["minAvailable"] = 1
    job["spec"]["minAvailable"] = 1
    c._put("MODIFIED", "Job", job)
    c.settle()
    new = c.outputs[before:]
    deletes = [x for x in new if isinstance(x, o.DeletePod)]
    assert [(d.name, d.reason, d.mark_out_of_sync) for d in deletes] == [("scaler-worker-1", "scale-down", False)]
    evicted = [x for x in new if isinstance(x, o.ActionResolved) and x.event == "PodEvicted"]
    assert [e.pod for e in evicted] == ["scaler-worker-1"]  # quirk 9: scale-down raises PodEvicted
    assert any(isinstance(x, o.UpdatePodGroup) and x.min_member == 1 for x in new)


def test_negative_policy_timeout_is_a_delayed_action_that_fires_at_once():
    """Volcano registers any non-zero delay: `timeout: -5s` is scheduled, then fires immediately."""
    job = {
        "metadata": {"name": "neg"},
        "spec": {
            "minAvailable": 1,
            "policies": [{"event": "PodFailed", "action": "AbortJob", "timeout": "-5s"}],
            "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}],
        },
    }
    c = SimCluster()
    c.add_queue()
    c.create_job(job)
    c.settle()
    c.schedule("default", "neg")
    c.settle()
    c.run(c.get("Pod", "default", "neg-w-0"))
    c.settle()
    before = len(c.outputs)
    c.fail(c.get("Pod", "default", "neg-w-0"), 2)
    c.settle()
    new = c.outputs[before:]
    events = [x.message for x in new if isinstance(x, o.RecordEvent)]
    assert "Execute action AbortJob after -5s" in events
    assert any(isinstance(x, o.TimerScheduled) for x in new)
    assert any(isinstance(x, o.TimerFired) and x.action == "AbortJob" for x in new)
    phases = [x.to_phase for x in new if isinstance(x, o.PhaseChanged)]
    assert phases[:1] == ["Aborting"]


def test_volume_claim_templates_get_one_pvc_each_with_a_deterministic_name():
    """§6.4: a volume with `volumeClaim` and no name gets a generated PVC, created once and booked."""
    job = {
        "metadata": {"name": "vols"},
        "spec": {
            "minAvailable": 1,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},  # an object field decodes too
            "volumes": [
                {"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"],
                                                        "resources": {"requests": {"storage": "1Gi"}}}},
                {"mountPath": "/ref", "volumeClaimName": "shared-ref"},
            ],
            "tasks": [{"name": "w", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}],
        },
    }
    c = SimCluster()
    c.add_queue()
    c.create_job(job)
    c.settle()
    c.schedule("default", "vols")
    c.settle()
    pvcs = [x for x in c.outputs if isinstance(x, o.CreatePVC)]
    assert len(pvcs) == 1
    name = pvcs[0].name
    assert name.startswith("vols-pvc-") and len(name) == len("vols-pvc-") + 12
    assert pvcs[0].claim["resources"]["requests"]["storage"] == "1Gi"
    status = c.engine.jobs["default/vols"].status
    assert status.controlled_resources[f"volume-pvc-{name}"] == name
    assert status.controlled_resources["volume-pvc-shared-ref"] == "shared-ref"
    pod = next(x for x in c.outputs if isinstance(x, o.CreatePod))
    claims = {v["persistentVolumeClaim"]["claimName"] for v in pod.pod["spec"]["volumes"] if "persistentVolumeClaim" in v}
    assert claims == {name, "shared-ref"}  # the pods mount the PVC that was created
