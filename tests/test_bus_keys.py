"""Injective keys and subjects: no two jobs share a KV key or a subject, whatever their names.

`team.a/flaky` used to be stored under `team.a.flaky`, which reads back as
`team/a.flaky`; names with unicode, NUL or CR were not projected at all. Now
every name has one key and one subject token of its own, valid Kubernetes
names keep the keys they always had, and a name that cannot be represented
(empty, too long) raises `Unaddressable` instead of being skipped silently.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from tests.fixtures_nats import decide_and_project
from tests.poison_logs import job_record
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import live_buckets
from vcbus.bus.publisher import prepare

NATS_KV_KEY = re.compile(r"^[-/_=.a-zA-Z0-9]+$")  # nats.go's validKeyRe
ALPHABET = "ab.-_/=%*> \t\r\n\x00\x7fé名\u3000Z9"


def random_names(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 6))) for _ in range(count)]


def valid_subject(subject: str) -> bool:
    tokens = subject.split(".")
    return all(tokens) and not any(ch.isspace() or ch in "*>" or ord(ch) < 0x20 for ch in subject)


def test_the_issue_pair_gets_two_keys_and_two_subjects():
    a, b = "team.a/x", "team/a.x"
    assert s.kv_key(a) != s.kv_key(b)
    assert s.job_of_key(s.kv_key(a)) == a and s.job_of_key(s.kv_key(b)) == b
    assert s.event_subject(a, "job.phase.changed.v1") != s.event_subject(b, "job.phase.changed.v1")


def test_valid_kubernetes_names_keep_their_keys():
    assert s.kv_key("default/resnet-dist-train") == "default.resnet-dist-train"
    assert s.kv_key("ns/a.b.c") == "ns.a.b.c"
    assert s.kv_key("kube-system/x-1") == "kube-system.x-1"


def test_keys_and_tokens_are_injective_and_valid_over_random_names():
    namespaces = random_names(1, 60)
    names = random_names(2, 60)
    jobs = {f"{ns}/{name}" for ns in namespaces for name in names if "/" not in ns}
    keys: dict[str, str] = {}
    subjects: dict[str, str] = {}
    for job in sorted(jobs):
        key = s.kv_key(job)
        assert NATS_KV_KEY.match(key) and valid_subject(f"$KV.b.{key}"), (job, key)
        assert s.job_of_key(key) == job
        assert keys.setdefault(key, job) == job, f"{job!r} and {keys[key]!r} share {key}"
        subject = s.event_subject(job, "job.phase.changed.v1")
        assert valid_subject(subject) and len(subject.split(".")) == 7, (job, subject)
        assert s.job_of_subject(subject) == job
        assert subjects.setdefault(subject, job) == job
    assert len(keys) == len(jobs) > 2000


@pytest.mark.parametrize("job", ["ns/" + "a" * 2000, "n" * 2000 + "/x", "ns/" + "." * 400])
def test_a_name_too_long_to_address_is_an_error_not_a_skip(job):
    with pytest.raises(s.Unaddressable):
        s.kv_key(job)
    with pytest.raises(s.Unaddressable):
        s.event_subject(job, "job.phase.changed.v1")


def test_header_values_never_carry_a_line_break():
    assert s.header_value("ns/a\r\nb") == "ns/a%0D%0Ab"
    msg = prepare(json.dumps(job_record("a\r\nb", "ns", 1)).encode(), _decode(job_record("a\r\nb", "ns", 1)))
    assert all("\r" not in v and "\n" not in v for v in msg.headers.values())


def _decode(rec):
    from statemachines.model.records import decode

    return decode(json.dumps(rec).encode())


ODD_JOBS = [("team.a", "flaky"), ("team", "a.flaky"), ("default", "名前"), ("default", "cr\rlf"), ("default", "nul\x00")]


@pytest.mark.nats
async def test_jobs_whose_keys_used_to_collide_or_be_skipped_are_all_projected(bus_settings):
    async with open_bus(bus_settings) as bus:
        for i, (ns, name) in enumerate(ODD_JOBS):
            rec = job_record(name, ns, 100 + i)
            rec["object"]["metadata"]["uid"] = f"uid-{i}"
            data = json.dumps(rec).encode()
            msg = prepare(data, _decode(rec))
            await bus.js.publish(msg.subject, msg.body, headers=msg.headers)
    decider, projector = await decide_and_project(bus_settings)
    assert decider.stats.poison == 0 and projector.views.poison == 0
    async with open_bus(bus_settings) as bus:
        status = (await live_buckets(bus))[s.STATUS_BUCKET]
    jobs = {s.job_of_key(k): json.loads(v) for k, v in status.items() if not k.startswith("_")}
    assert set(jobs) == {f"{ns}/{name}" for ns, name in ODD_JOBS}
    assert all(v["state"]["phase"] == "Pending" for v in jobs.values())
    assert "team=2Ea.flaky" in status and "team.a.flaky" in status
