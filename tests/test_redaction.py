"""Private keys in plugin arguments never reach the bus in clear (vcbus.k8s.redaction).

Pure: every Go flag spelling of `ssh-private-key` is replaced by a sha256 digest, the
last-applied-configuration copy too, and nothing else changes. On a real API server and
nats-server: a vcjob applied with a private key reaches VCBUS_K8S (and the bridge's KV
positions) without it, the decider decides the same, and the actuator still writes the
user's key into the ssh Secret, read from the live vcjob.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import pathlib

import pytest
import yaml
from kubernetes import client

from statemachines import outputs as o
from statemachines.admission.mutate import mutate_job
from statemachines.plugins.args import Flag, parse_flags
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.reading import read_stream
from vcbus.k8s.actuator import JOB_GROUP, JOB_PLURAL, JOB_VERSION, Actuator
from vcbus.k8s.bridge import BRIDGE_BUCKET
from vcbus.k8s.redaction import LAST_APPLIED, PREFIX, redact_args, redact_job

KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAtest\n-----END RSA PRIVATE KEY-----\n"
DIGEST = PREFIX + hashlib.sha256(KEY.encode()).hexdigest()
SEED = pathlib.Path(__file__).resolve().parents[1] / "examples" / "resnet-dist-train.yaml"


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--ssh-private-key=" + KEY], ["--ssh-private-key=" + DIGEST]),
        (["-ssh-private-key=" + KEY], ["-ssh-private-key=" + DIGEST]),
        (["--ssh-private-key", KEY, "--ssh-port=2222"], ["--ssh-private-key", DIGEST, "--ssh-port=2222"]),
        (["-ssh-private-key", "-" + KEY], ["-ssh-private-key", PREFIX + hashlib.sha256(("-" + KEY).encode()).hexdigest()]),
        (["--ssh-public-key=ssh-rsa AAAA", "--ssh-key-file-path=/home/u/.ssh"],
         ["--ssh-public-key=ssh-rsa AAAA", "--ssh-key-file-path=/home/u/.ssh"]),
        (["---ssh-private-key=" + KEY], ["---ssh-private-key=" + KEY]),  # not a flag for Go: left as it is
        (["--ssh-private-key=" + DIGEST], ["--ssh-private-key=" + DIGEST]),  # already redacted: stable
    ],
)
def test_every_spelling_of_the_private_key_flag_is_replaced_by_its_digest(args, expected):
    assert redact_args(args, ("ssh-private-key",)) == expected


def test_the_redacted_arguments_parse_as_the_originals_do_apart_from_the_key():
    flags = (Flag("ssh-private-key", "string", ""), Flag("ssh-port", "int", 22))
    for args in (["--ssh-private-key", KEY, "--ssh-port=2222"], ["-ssh-private-key=" + KEY, "x", "--ssh-port=1"]):
        before, after = parse_flags(args, flags), parse_flags(redact_args(args, ("ssh-private-key",)), flags)
        assert {**before.values, "ssh-private-key": DIGEST} == after.values and before.rest == after.rest


def test_a_vcjob_loses_its_key_everywhere_and_keeps_everything_else():
    job = yaml.safe_load(SEED.read_text())
    job["spec"]["plugins"]["ssh"] = ["--ssh-private-key=" + KEY, "--ssh-public-key=ssh-rsa AAAA"]
    job["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(job), "other": "kept"}
    original = json.loads(json.dumps(job))
    red = redact_job(job)
    assert job == original  # the input is not modified
    text = json.dumps(red)
    assert "BEGIN RSA PRIVATE KEY" not in text and "MIIEpAIBAAKCAQEAtest" not in text
    assert red["spec"]["plugins"]["ssh"] == ["--ssh-private-key=" + DIGEST, "--ssh-public-key=ssh-rsa AAAA"]
    assert json.loads(red["metadata"]["annotations"][LAST_APPLIED])["spec"]["plugins"]["ssh"][0].endswith(DIGEST)
    assert red["metadata"]["annotations"]["other"] == "kept"
    assert {k: v for k, v in red["spec"].items() if k != "plugins"} == {k: v for k, v in job["spec"].items() if k != "plugins"}
    broken = {**job, "metadata": {"annotations": {LAST_APPLIED: "{not json"}}}
    assert LAST_APPLIED not in redact_job(broken)["metadata"]["annotations"]  # cannot be redacted: dropped
    plain = yaml.safe_load(SEED.read_text())
    assert redact_job(plain) is plain  # nothing to redact: the same object
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"plugins": {"ssh": ["--ssh-private-key=" + KEY]}}}
    assert redact_job(pod) is pod  # only vcjobs


@pytest.mark.k8s
@pytest.mark.nats
async def test_the_bus_never_sees_the_key_and_the_secret_still_gets_it(k8s, k8s_namespace, bus_settings):
    from tests.test_bridge import bridge_running, wait_settled

    api = k8s.api_client()
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    ns = k8s_namespace
    job = mutate_job(yaml.safe_load(SEED.read_text()))
    job["metadata"].update(name="keyed", namespace=ns)
    job["spec"]["plugins"]["ssh"] = ["--ssh-private-key=" + KEY, "--ssh-public-key=ssh-rsa AAAA"]
    job["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(job)}  # as `kubectl apply` leaves it
    async with open_bus(bus_settings) as bus:
        async with bridge_running(bus.js, api, ns) as bridge:
            job = custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, job)
            deadline = asyncio.get_running_loop().time() + 60
            records: list[bytes] = []
            while not any(b'"keyed"' in r for r in records):
                assert asyncio.get_running_loop().time() < deadline, "the vcjob never reached VCBUS_K8S"
                await asyncio.sleep(0.1)
                records = [m.data async for batch in read_stream(bus.js, s.K8S_STREAM) for m in batch]
            await wait_settled(bus.js, bridge, timeout=30)
        kv = await bus.js.key_value(BRIDGE_BUCKET)
        stored = [(await kv.get(k)).value for k in await kv.keys()]
    for data in records + stored:
        assert b"BEGIN RSA PRIVATE KEY" not in data and b"MIIEpAIBAAKCAQEAtest" not in data
    record = next(json.loads(r) for r in records if b'"keyed"' in r)
    assert record["object"]["spec"]["plugins"]["ssh"][0] == "--ssh-private-key=" + DIGEST
    # the actuator renders the Secret from the live vcjob: the user's key, not the digest
    act = Actuator(api)
    assert act.apply(o.PluginHook(job=f"{ns}/keyed", seq=1, hook="OnJobAdd", plugins=["ssh"])) == "applied"
    secret = core.read_namespaced_secret("keyed-ssh", ns)
    assert base64.b64decode(secret.data["id_rsa"]).decode() == KEY


def test_the_decider_decides_the_same_from_the_redacted_log(tmp_path):
    """The seed log with an ssh key in its vcjob, replayed as observed and as the bridge publishes it:
    the same decisions (the key only ever reaches the Secret, which the actuator renders)."""
    from tests.fixtures_nats import SEED_LOG, vcbus_cli
    from tests.test_replay_cli import records

    raw = records(SEED_LOG)
    for rec in raw:
        if rec["object"].get("kind") == "Job":
            rec["object"]["spec"].setdefault("plugins", {})["ssh"] = ["--ssh-private-key", KEY]
    observed, published = tmp_path / "observed.jsonl", tmp_path / "published.jsonl"
    observed.write_text("".join(json.dumps(r) + "\n" for r in raw))
    published.write_text("".join(json.dumps({**r, "object": redact_job(r["object"])}) + "\n" for r in raw))
    assert KEY.split("\n")[1] in observed.read_text() and KEY.split("\n")[1] not in published.read_text()
    a, b = (vcbus_cli("replay", str(p), "--json") for p in (observed, published))
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert json.loads(a.stdout) == json.loads(b.stdout)
