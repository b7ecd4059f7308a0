"""Resource arithmetic (reference §9) and what a pod record means to the scheduler (§2.2, §2.3, §9.3)."""

from __future__ import annotations

import msgspec
import pytest

from statemachines.scheduler import objects
from statemachines.scheduler.model import task_status
from statemachines.scheduler.resources import (
    Res,
    exceeded_part,
    exceeds_on_requested,
    failing_names,
    from_resource_list,
    less_equal,
    max_dims,
    min_dims,
    share,
    to_quantities,
)
from statemachines.scheduler.tasks import TaskFact
from tests.sched_builders import GI, pod


def fact(obj: dict) -> TaskFact:
    return TaskFact(msgspec.convert(obj, objects.Pod))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"cpu": "500m", "memory": "1Gi"}, (500, GI, {})),
        ({"cpu": 2, "memory": "1.5G", "pods": "110"}, (2000, 1.5e9, {"pods": 110})),
        ({"nvidia.com/gpu": "1", "hugepages-2Mi": "4Mi"}, (0, 0, {"nvidia.com/gpu": 1000, "hugepages-2Mi": 4 * 1024**2 * 1000})),
        ({"ephemeral-storage": "1k"}, (0, 0, {"ephemeral-storage": 1_000_000})),
        ({"count/pods": "3", "requests.cpu": "2", "storage": "1Gi"}, (0, 0, {})),
        ({"cpu": "0.1m"}, (1, 0, {})),  # MilliValue rounds up
    ],
)
def test_resource_list_units(raw, expected):
    res = from_resource_list(raw)
    assert (res.cpu, res.mem, res.sc) == expected


def test_bad_quantity_names_the_field():
    with pytest.raises(ValueError, match=r"Pod x\.cpu: quantities must match"):
        from_resource_list({"cpu": "lots"}, "Pod x")


@pytest.mark.parametrize(
    ("res", "printed"),
    [
        (Res(9000, 24 * GI, {"pods": 3}), {"cpu": "9", "memory": "24Gi", "pods": "3"}),
        (Res(1500, 1000), {"cpu": "1500m", "memory": "1k"}),
        (Res(0, 0), {"cpu": "0", "memory": "0"}),
        (Res(250, 1023, {"nvidia.com/gpu": 2000}), {"cpu": "250m", "memory": "1023", "nvidia.com/gpu": "2"}),
    ],
)
def test_queue_status_quantities(res, printed):
    assert to_quantities(res) == printed


def test_less_equal_has_an_epsilon_and_dimension_defaults():
    assert less_equal(Res(1000.05, 0), Res(1000, 0))
    assert not less_equal(Res(1000.1, 0), Res(1000, 0))
    assert not less_equal(Res(0, 0, {"nvidia.com/gpu": 1}), Res(0, 0))  # missing on the right = 0
    assert less_equal(Res(0, 0, {"nvidia.com/gpu": 1}), Res(0, 0), infinity=True)
    assert not less_equal(Res(0, 0), Res(0, 0, {"x/y": 1}), infinity=True)  # right has a scalar left lacks
    assert failing_names(Res(2, 3, {"b/x": 2, "a/x": 2}), Res(1, 1)) == ["cpu", "memory", "a/x", "b/x"]


def test_requested_dimension_comparison_is_strict_and_ignores_pods():
    req = Res(1000, 0, {"pods": 1})
    assert exceeds_on_requested(Res(2000, 5 * GI, {"pods": 9}), Res(1000, 0, {"pods": 0}), req) == ["cpu"]
    assert exceeds_on_requested(Res(1000.05, 0, {"pods": 1}), Res(1000, 0), req) == ["cpu"]  # no epsilon
    assert exceeds_on_requested(Res(0, 0, {"nvidia.com/gpu": 3000}), Res(0, 0, {"nvidia.com/gpu": 2000}),
                                Res(0, 0, {"nvidia.com/gpu": 1000})) == ["nvidia.com/gpu"]
    assert exceeds_on_requested(Res(5000, 0), Res(0, 0), Res(1000, 0, {"pods": 1})) == ["cpu"]  # left without scalars


def test_is_empty_ignores_pods_and_small_values():
    assert Res(0.05, 0.05, {"pods": 1}).is_empty()
    assert not Res(0, 0, {"nvidia.com/gpu": 1}).is_empty()
    assert Res(1000, 0, {"pods": 1}).names() == ["cpu", "pods"]


def test_helpers():
    assert share(0, 0) == 0 and share(1, 0) == 1 and share(1, 4) == 0.25
    assert exceeded_part(Res(5, 1, {"a/b": 1}), Res(3, 2)).key() == (2, 0, (("a/b", 1),))
    assert min_dims(Res(5, 5, {"a/b": 4, "c/d": 4}), Res(3, 9, {"a/b": 1})).key() == (3, 5, (("a/b", 1), ("c/d", 0)))
    assert min_dims(Res(5, 5, {"c/d": 4}), Res(3, 9), infinity=True).sc == {"c/d": 4}
    assert max_dims(Res(1, 5, {"a/b": -1}), Res(3, 2)).key() == (3, 5, ())


def test_pod_request_sums_containers_and_takes_the_init_maximum():
    p = pod("p-0", "g", cpu="1", memory="1Gi", init_containers=[
        {"name": "init", "resources": {"requests": {"cpu": "3", "memory": "512Mi"}}},
    ])
    req = fact(p).req
    assert (req.cpu, req.mem, req.sc) == (3000, GI, {"pods": 1})


def test_pod_request_with_sidecars():
    # sidecar 500m runs beside everything; the normal init container's effective request adds the sidecars before it
    p = pod("p-0", "g", cpu="1", memory=None, init_containers=[
        {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
        {"name": "init", "resources": {"requests": {"cpu": "2"}}},
    ])
    assert fact(p).req.cpu == 2500  # max(1 + 0.5, 2 + 0.5)
    p["spec"]["overhead"] = {"cpu": "100m"}
    assert fact(p).req.cpu == 2600


def test_pod_facts():
    p = pod("job-worker-3", "job", role="worker", priority=7, annotations={"volcano.sh/preemptable": "false"})
    f = fact(p)
    assert (f.group, f.role, f.priority, f.preemptable, f.index, f.status) == ("default/job", "worker", 7, False, 3, "Pending")
    p = pod("job-1", None, annotations={"volcano.sh/task-priority": "42"}, labels={"volcano.sh/task-spec": "ps"})
    f = fact(p)
    assert (f.group, f.role, f.priority, f.preemptable, f.index) == ("", "ps", 42, True, None)
    assert fact(pod("a", "g", cpu=None, memory=None)).best_effort
    assert fact(pod("a", "g")).priority == 1  # no spec.priority


@pytest.mark.parametrize(
    ("phase", "node", "deleting", "status"),
    [
        ("Pending", "", False, "Pending"),
        ("Pending", "n1", False, "Bound"),
        ("Pending", "", True, "Releasing"),
        ("Running", "n1", False, "Running"),
        ("Running", "n1", True, "Releasing"),
        ("Succeeded", "n1", False, "Succeeded"),
        ("Failed", "n1", True, "Failed"),
        ("", "", False, "Unknown"),
    ],
)
def test_task_status(phase, node, deleting, status):
    assert task_status(phase, node, deleting) == status
