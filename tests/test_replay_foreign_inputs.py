"""Empty and foreign inputs to the commands that read a watch log: `vcbus replay`, `vcbus publish`,
`vcbus demo`. Each exits 2 with one `error:` line that says what the input is and how to record a log,
instead of an answer about nothing (`0 records read; 0 job(s)`, exit 0) or bytes that do not parse.

Real `vcbus` processes on real files and pipes; `publish` against a real nats-server (refused before it
connects), `demo` with its own embedded one.
"""

from __future__ import annotations

import gzip
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "resnet-dist-train.json"
HINT = "record one with `vcbus record -A -o watch.log`"
DEPLOYMENT = {"type": "ADDED", "object": {"apiVersion": "apps/v1", "kind": "Deployment",
                                          "metadata": {"name": "web", "namespace": "default", "uid": "u-1",
                                                       "resourceVersion": "5"}}}


def vcbus(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], input=stdin, capture_output=True,
                          cwd=ROOT, timeout=120)


def refused(res: subprocess.CompletedProcess, *words: str) -> str:
    err = res.stderr.decode()
    assert res.returncode == 2, (res.returncode, err, res.stdout.decode()[-500:])
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: ") and "Traceback" not in err, err
    for word in words:
        assert word in last, last
    return last


@pytest.fixture
def inputs(tmp_path: pathlib.Path) -> dict[str, pathlib.Path]:
    files = {
        "empty": b"",
        "blank": b"\n\n  \n",
        "deployments": (json.dumps(DEPLOYMENT) + "\n").encode(),
        "gzip": gzip.compress(SEED.read_bytes()),
        "binary": bytes(range(256)) * 4,
    }
    out = {}
    for name, data in files.items():
        path = tmp_path / f"{name}.log"
        path.write_bytes(data)
        out[name] = path
    return out


def test_replay_refuses_an_empty_file_or_pipe(inputs):
    for name in ("empty", "blank"):
        path = inputs[name]
        refused(vcbus("replay", str(path)), f"{path}: no watch records in it", HINT)
        refused(vcbus("replay", "--json", str(path)), "no watch records in it")
        refused(vcbus("replay", "-", stdin=path.read_bytes()), "<stdin>: no watch records in it")


def test_replay_refuses_a_log_of_kinds_it_does_not_read(inputs):
    path = inputs["deployments"]
    refused(vcbus("replay", str(path)), f"{path}: holds 1 Deployment record(s), none of a kind vcbus replays", HINT)
    # a log of what only the scheduler reads is a log of this cluster: an answer (no jobs), not an error
    node = {"type": "ADDED", "object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "uid": "u",
                                                                                          "resourceVersion": "3"}}}
    nodes = path.with_name("nodes.log")
    nodes.write_text(json.dumps(node) + "\n" + json.dumps(DEPLOYMENT) + "\n")
    res = vcbus("replay", str(nodes))
    assert res.returncode == 0 and res.stdout.decode().startswith("2 records read, 2 ignored"), res.stderr.decode()


def test_replay_names_compressed_and_binary_data(inputs):
    gz = inputs["gzip"]
    refused(vcbus("replay", str(gz)), f"{gz}: gzip-compressed data, not a watch log",
            f"`gunzip -c {gz} | vcbus replay -`")
    refused(vcbus("replay", "-", stdin=gz.read_bytes()), "<stdin>: gzip-compressed data", "gunzip -c FILE |")
    refused(vcbus("replay", str(inputs["binary"])), "binary data (a control character, byte 0x00), not a watch log",
            HINT)


@pytest.mark.nats
def test_publish_refuses_them_before_it_connects(inputs, bus_settings):
    url = bus_settings.nats_url
    refused(vcbus("publish", str(inputs["empty"]), "--nats", url), "no watch records in it", HINT)
    refused(vcbus("publish", str(inputs["deployments"]), "--nats", url), "holds 1 record(s), none of a kind")
    refused(vcbus("publish", str(inputs["gzip"]), "--nats", url), "gzip-compressed data",
            f"`gunzip -c {inputs['gzip']} | vcbus publish -`")
    refused(vcbus("publish", "-", "--nats", url, stdin=inputs["binary"].read_bytes()), "<stdin>: binary data")


@pytest.mark.slow
def test_demo_refuses_them(inputs):
    refused(vcbus("demo", str(inputs["empty"])), "no watch records in it")
    refused(vcbus("demo", str(inputs["deployments"])), "none of a kind vcbus reads")
    gz = inputs["gzip"]
    refused(vcbus("demo", str(gz)), f"`gunzip -c {gz} > watch.log`, then `vcbus demo watch.log`")


def batch_job_log(tmp_path: pathlib.Path) -> pathlib.Path:
    """A batch/v1 Job, its pod for Volcano's scheduler and the PodGroup Volcano's podgroup controller made for it:
    kinds vcbus reads (the podgroup controller's part), with no vcjob among them."""
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": "bj-1", "controller": True}
    meta = lambda name, uid, rv: {"name": name, "namespace": "default", "uid": uid, "resourceVersion": rv,  # noqa: E731
                                  "creationTimestamp": "2026-11-30T08:00:00Z"}
    recs = [
        {"type": "ADDED", "object": {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("pi", "bj-1", "10"),
                                     "spec": {"template": {"spec": {"schedulerName": "volcano", "containers": [
                                         {"name": "pi", "image": "perl"}]}}}, "status": {"active": 1}}},
        {"type": "ADDED", "object": {"apiVersion": "v1", "kind": "Pod",
                                     "metadata": {**meta("pi-x7k2p", "p-1", "11"), "ownerReferences": [owner]},
                                     "spec": {"schedulerName": "volcano", "containers": [{"name": "pi", "image": "perl"}]},
                                     "status": {"phase": "Pending"}}},
        {"type": "ADDED", "object": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                     "metadata": {**meta("podgroup-bj-1", "g-1", "12"), "ownerReferences": [owner]},
                                     "spec": {"minMember": 1, "queue": "default"}, "status": {"phase": "Pending"}}},
    ]
    log = tmp_path / "batch-jobs.log"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return log


def test_a_log_of_batch_jobs_is_read_without_asking_for_vcjobs(tmp_path):
    """batch/v1 Jobs are bridged (Volcano's podgroup controller gives their pods a PodGroup): their log is no
    foreign log, and their pods and PodGroups are no vcjob's whose records are missing."""
    log = batch_job_log(tmp_path)
    res = vcbus("replay", str(log))
    err = res.stderr.decode()
    assert res.returncode == 0 and res.stdout.decode().startswith("3 records read"), err
    assert "no vcjob records" not in err and "none of a kind" not in err, err
    # the same pod owned by a vcjob that the log lacks still gets the warning
    vc = tmp_path / "vcjob-pods.log"
    vc.write_text(log.read_text().replace('"apiVersion": "batch/v1", "kind": "Job", "name"',
                                          '"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name"'))
    assert vc.read_text() != log.read_text()
    res = vcbus("replay", str(vc))
    assert res.returncode == 0 and "the log has no vcjob records" in res.stderr.decode(), res.stderr.decode()
