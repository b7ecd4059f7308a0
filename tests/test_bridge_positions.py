"""The bridge's stored watch positions (vcbus.k8s.positions): compressed when large, and a stored
value that cannot be read is a warning and a fresh list, never a bridge that stops."""

from __future__ import annotations

import copy
import hashlib
import logging
import zlib

import msgspec
import pytest

from vcbus.k8s import positions
from vcbus.k8s.bridge import trim


def uid(seed: str) -> str:
    """A uid as random as the API server's (compression gains nothing on it)."""
    h = hashlib.sha256(seed.encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def pod(i: int) -> dict:
    """A vcjob's pod as the API server returns it (spec and status), of some 2 KB."""
    job = f"train-{i // 9}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{job}-worker-{i % 9}", "namespace": "ml", "uid": uid(f"pod{i}"),
            "resourceVersion": str(100000 + i), "creationTimestamp": "2026-11-30T10:00:00Z",
            "labels": {"volcano.sh/job-name": job, "volcano.sh/task-spec": "worker", "volcano.sh/job-namespace": "ml"},
            "annotations": {"volcano.sh/job-version": "0", "volcano.sh/task-index": str(i % 9),
                            "scheduling.k8s.io/group-name": f"{job}-{uid(job)}"},
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job,
                                 "uid": uid(job), "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/ml/trainer:2026.11.3",
                                 "env": [{"name": f"OPT_{k}", "value": "x" * 30} for k in range(12)]}],
                 "nodeName": f"node-{i % 100}", "schedulerName": "volcano"},
        "status": {"phase": "Running", "podIP": f"10.0.{i // 250}.{i % 250}"},
    }


def test_a_small_position_is_plain_json_and_reads_back():
    position = {"resourceVersion": "123", "known": {"u1": trim(pod(1))}}
    value = positions.encode(position)
    assert value.startswith(b"{") and msgspec.json.decode(value) == position
    assert positions.decode(value) == position


def test_a_position_of_twenty_thousand_pods_fits_the_servers_max_payload():
    known = {p["metadata"]["uid"]: trim(p) for p in map(pod, range(20_000))}
    position = {"resourceVersion": "999999", "known": known}
    plain = msgspec.json.encode(position)
    value = positions.encode(position)
    assert len(plain) > 8 << 20  # as JSON it would not fit
    assert value.startswith(positions.MAGIC) and len(value) < 2 << 20
    assert positions.decode(value) == position


@pytest.mark.parametrize("value, why", [
    (b"{not json", "cannot be read"),
    (b"[1, 2, 3]", "not a watch position"),
    (b'{"resourceVersion": 7, "known": {}}', "resourceVersion is not a string"),
    (b'{"resourceVersion": "7", "known": []}', "not a watch position"),
    (b'{"resourceVersion": "7", "known": {"u": 3}}', "not an object with metadata"),
    (b'{"resourceVersion": "7", "known": {"u": {"metadata": "x"}}}', "not an object with metadata"),
    (positions.MAGIC + b"\x00\x01 not zlib", "cannot be read"),
    (positions.MAGIC + zlib.compress(b'{"resourceVersion": "1", "known": {}}')[:-6], "cannot be read"),
])
def test_a_stored_value_that_cannot_be_used_is_ignored_with_a_warning(value, why, caplog):
    with caplog.at_level(logging.WARNING, logger="vcbus.bridge"):
        assert positions.decode(value, key="pods.ml") is None
    assert "pods.ml" in caplog.text and why in caplog.text and "listing from scratch" in caplog.text


def test_a_value_that_inflates_past_the_bound_is_refused(monkeypatch, caplog):
    monkeypatch.setattr(positions, "MAX_INFLATED", 1 << 20)  # a smaller bound, so the test stays small
    bomb = positions.MAGIC + zlib.compress(b'{"resourceVersion": "1", "known": {"' + b"a" * (4 << 20) + b'": {}}}')
    with caplog.at_level(logging.WARNING, logger="vcbus.bridge"):
        assert positions.decode(bomb, key="pods") is None
    assert "within 1 MiB" in caplog.text


def test_nothing_stored_is_no_position():
    assert positions.decode(b"") is None and positions.decode(None) is None


def test_encoding_leaves_the_position_as_it_was():
    position = {"resourceVersion": "5", "known": {str(i): trim(pod(i)) for i in range(3000)}}
    before = copy.deepcopy(position)
    positions.decode(positions.encode(position))
    assert position == before
