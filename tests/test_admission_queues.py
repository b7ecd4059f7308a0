"""Queue validating webhook (validate_queue.go) and the quantity arithmetic behind it."""

from __future__ import annotations

import pytest

from statemachines.admission import QueueIndex, validate_queue
from statemachines.admission.quantity import Quantity


def q(name, *, parent=None, state="Open", annotations=None, **spec):
    queue = {"metadata": {"name": name, "annotations": annotations or {}}, "spec": dict(spec), "status": {"state": state}}
    if parent is not None:
        queue["spec"]["parent"] = parent
    return queue


def index(*queues):
    return QueueIndex(list(queues))


CREATE_CASES = [
    ("negative_capability", q("a", capability={"cpu": "-10"}), 'requestBody.spec.capability.cpu: Invalid value: "-10": must be greater than or equal to 0'),
    ("guarantee_missing_in_deserved", q("a", guarantee={"resource": {"cpu": "1"}}),
     'requestBody.spec.deserved.cpu: Invalid value: "<nil>": deserved[cpu] must be >= guarantee[cpu]=1'),
    ("deserved_below_guarantee", q("a", guarantee={"resource": {"cpu": "2"}}, deserved={"cpu": "1"}),
     'requestBody.spec.deserved.cpu: Invalid value: "1": deserved[cpu]=1 must be >= guarantee[cpu]=2'),
    ("deserved_above_capability", q("a", deserved={"cpu": "3"}, capability={"cpu": "2"}),
     'requestBody.spec.deserved.cpu: Invalid value: "3": deserved[cpu]=3 must be <= capability[cpu]=2'),
    ("bad_state_reported_under_spec_state", q("a", state="Closing"), 'requestBody.spec.state: Invalid value: "Closing": queue state must be in [Open Closed]'),
    ("hierarchy_length", q("a", annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1"}),
     'requestBody.metadata.annotations: Invalid value: "root/a": volcano.sh/hierarchy must have the same length with volcano.sh/hierarchy-weights'),
    ("hierarchy_weight_positive", q("a", annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/0"}),
     'requestBody.metadata.annotations: Invalid value: "1/0": 0 in the 1/0 must be larger than 0'),
    ("hierarchy_weight_number", q("a", annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/x"}),
     'requestBody.metadata.annotations: Invalid value: "1/x": x in the 1/x is invalid number: strconv.ParseFloat: parsing "x": invalid syntax'),
    ("self_parent", q("a", parent="a"), "queue a cannot use itself as parent"),
    ("missing_parent", q("a", parent="p"), 'failed to get parent queue p of queue a: queue.scheduling.volcano.sh "p" not found'),
]


@pytest.mark.parametrize(("queue", "text"), [c[1:] for c in CREATE_CASES], ids=[c[0] for c in CREATE_CASES])
def test_queue_create_rule(queue, text):
    assert validate_queue("CREATE", queue, None, index()) == text


def test_several_field_errors_are_aggregated_in_brackets():
    text = validate_queue("CREATE", q("a", capability={"cpu": "-1", "memory": "-1"}), None, index())
    assert text.startswith("[requestBody.spec.capability.cpu: ") and ", requestBody.spec.capability.memory:" in text


def test_valid_queue_and_parent_root():
    assert validate_queue("CREATE", q("a", parent="root", capability={"cpu": "4"}), None, index()) is None


def test_depth_limit():
    chain = [q("l1", parent="root"), q("l2", parent="l1"), q("l3", parent="l2"), q("l4", parent="l3")]
    assert validate_queue("CREATE", q("l5", parent="l4"), None, index(*chain)) is None
    assert validate_queue("CREATE", q("l6", parent="l5"), None, index(*chain, q("l5", parent="l4"))) == \
        "queue l6 exceeds the maximum allowed depth of 5"


def test_parent_with_allocated_pods_and_no_children():
    parent = q("p")
    parent["status"]["allocated"] = {"pods": "3"}
    assert validate_queue("CREATE", q("a", parent="p"), None, index(parent)) == \
        "queue p cannot be the parent queue of queue a because it has allocated Pods: 3"


def test_root_resources_are_protected_on_update():
    old, new = q("root", capability={"cpu": "4"}), q("root", capability={"cpu": "8"})
    assert validate_queue("UPDATE", new, old, index(old)) == \
        "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
    assert validate_queue("UPDATE", new, old, index(old), root_protection=False) is None


def test_child_capability_above_ancestor():
    parent = q("p", parent="root", capability={"cpu": "2"})
    assert validate_queue("CREATE", q("c", parent="p", capability={"cpu": "4"}), None, index(parent)) == \
        "queue c capability[cpu]=4 exceeds its ancestor's capability=2"


def test_siblings_guarantee_sum_above_parent():
    parent = q("p", parent="root", guarantee={"resource": {"cpu": "2"}}, deserved={"cpu": "2"})
    sibling = q("s", parent="p", guarantee={"resource": {"cpu": "1"}}, deserved={"cpu": "1"})
    text = validate_queue("CREATE", q("c", parent="p", guarantee={"resource": {"cpu": "2"}}, deserved={"cpu": "2"}), None,
                          index(parent, sibling))
    assert text == ("parent queue p validation failed: sum of children's guarantee (cpu 3000.00, memory 0.00) "
                    "exceeds parent's guarantee limit (cpu 2000.00, memory 0.00)")


def test_parent_capability_below_descendants():
    child = q("c", parent="p", capability={"memory": "2Gi"})
    assert validate_queue("UPDATE", q("p", parent="root", capability={"memory": "1Gi"}), q("p", parent="root"), index(child)) == \
        "queue p capability[memory]=1Gi is smaller than its descendants' max capability=2Gi"


@pytest.mark.parametrize(("name", "text"), [("default", "`default` queue can not be deleted"), ("root", "`root` queue can not be deleted")])
def test_default_and_root_cannot_be_deleted(name, text):
    assert validate_queue("DELETE", q(name), None, index(q(name))) == text


def test_delete_with_children_lists_them_and_open_queue_may_go():
    queues = index(q("p"), q("b", parent="p"), q("a", parent="p"))
    assert validate_queue("DELETE", q("p"), None, queues) == "queue p can not be deleted because it has 2 child queues: a, b"
    assert validate_queue("DELETE", q("a"), None, queues) is None


def test_delete_allocated_pods_check_is_opt_in():
    busy = q("busy")
    busy["status"]["allocated"] = {"pods": "2"}
    assert validate_queue("DELETE", busy, None, index(busy)) is None
    assert validate_queue("DELETE", busy, None, index(busy), allocated_pods_check=True) == \
        "queue busy cannot be deleted because it has allocated Pods: 2"


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("1", "1"), ("1000m", "1"), ("1500m", "1500m"), ("0.5", "500m"), ("2Gi", "2Gi"), ("1536Mi", "1536Mi"),
     ("1024", "1024"), ("1k", "1k"), ("1e3", "1e3"), ("100Ki", "100Ki"), ("512", "512"), ("0.1Ki", "102400m")],
)
def test_quantity_canonical_form(text, canonical):
    assert str(Quantity.parse(text)) == canonical


def test_quantity_sum_keeps_first_format():
    assert str(Quantity.parse("1Gi") + Quantity.parse("1G")) == str(Quantity(2073741824, "BinarySI"))
    assert Quantity.parse("1") == Quantity.parse("1000m")
