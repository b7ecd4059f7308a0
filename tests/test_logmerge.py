"""`vcbus.logmerge.OrderCheck`: one input out of resourceVersion order across kinds.

The check reads a record's resourceVersion as the record carries it (text): the
numbers etcd writes are compared, anything else (none, not an integer, negative)
is not checked and changes nothing. Records of one kind never count against each
other (a kubectl watch lists its objects by name first).
"""

from __future__ import annotations

import pytest

from statemachines.model.objects import Job, Pod, PodGroup
from vcbus.logmerge import OrderCheck


def test_records_in_order_across_kinds_pass():
    order = OrderCheck("log")
    for seq, (kind, rv) in enumerate([(Job, "10"), (Pod, "11"), (PodGroup, "12"), (Pod, "13"), (Job, "20")], 1):
        assert order.check(kind, rv, seq) is None
    assert order.found is None


def test_a_record_older_than_another_kinds_is_named_with_both():
    order = OrderCheck("watch.log")
    assert order.check(Pod, "100", 1) is None
    found = order.check(Job, "42", 2)
    assert found == order.found
    assert found is not None and found.startswith(
        "watch.log: record 2, a vcjob at resourceVersion 42, comes after a Pod record at 100")


def test_records_of_one_kind_never_count_against_each_other():
    order = OrderCheck("log")
    assert order.check(Pod, "30", 1) is None
    assert order.check(Pod, "20", 2) is None  # listed by name, not by resourceVersion
    assert order.check(Job, "31", 3) is None
    found = order.check(Job, "25", 4)  # older than the Pod at 30, another kind
    assert found is not None and "record 4" in found and "at 30" in found


@pytest.mark.parametrize("rv", ["", "abc", "-5", "1.5", "12a"])
def test_a_resource_version_that_is_not_a_number_etcd_writes_is_not_checked(rv):
    order = OrderCheck("log")
    assert order.check(Pod, "100", 1) is None
    assert order.check(Job, rv, 2) is None
    assert (order.top_rv, order.top_kind, order.second_rv) == (100, Pod, -1)  # and changes nothing
    assert order.check(Job, "99", 3) is not None  # a number still is checked after it
