"""Admission is complete for what the engine reads: Go durations, int32, ports, object shape, the pod limit.

The inputs are the ones of issue 9 (section 3): `timeout: soon` and `99999999999h`,
replicas 2^31 and 2^64, a plugin port over 65535, a NUL byte, `metadata: [a]`,
`name: 2026-11-30`, 3,000-deep YAML and an alias bomb. `validate` and `render`
answer each with a clear message and exit 1 (denied) or 2 (unreadable), never
a traceback.
"""

from __future__ import annotations

import copy
import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from statemachines.admission import QueueIndex, default_queues, validate_create, validate_update
from statemachines.admission.bounds import DEFAULT_MAX_PODS, BoundsProblem, check_job_size, object_problems
from statemachines.admission.plugin_warnings import plugin_warnings
from statemachines.admission.review import Settings, handle
from statemachines.model.durations import DurationError, parse_go_duration
from statemachines.model.objects import Job, LifecyclePolicy
from statemachines.model.timefmt import parse_duration
from statemachines.policies import Request, resolve
from vcbus.cli.main import main

REPO = pathlib.Path(__file__).resolve().parents[1]
SEED = yaml.safe_load((REPO / "examples" / "resnet-dist-train.yaml").read_text())
S, MS, US, NS = 10**9, 10**6, 10**3, 1

# Go's own table (src/time/time_test.go, parseDurationTests), valid half.
GO_VALID = [
    ("0", 0), ("5s", 5 * S), ("30s", 30 * S), ("1478s", 1478 * S), ("-5s", -5 * S), ("+5s", 5 * S),
    ("-0", 0), ("+0", 0), ("5.0s", 5 * S), ("5.6s", 5 * S + 600 * MS), ("5.s", 5 * S), (".5s", 500 * MS),
    ("1.0s", S), ("1.00s", S), ("1.004s", S + 4 * MS), ("1.0040s", S + 4 * MS), ("100.00100s", 100 * S + MS),
    ("10ns", 10), ("11us", 11 * US), ("12µs", 12 * US), ("12μs", 12 * US), ("13ms", 13 * MS), ("14s", 14 * S),
    ("15m", 15 * 60 * S), ("16h", 16 * 3600 * S), ("3h30m", 3 * 3600 * S + 30 * 60 * S),
    ("10.5s4m", 4 * 60 * S + 10 * S + 500 * MS), ("-2m3.4s", -(2 * 60 * S + 3 * S + 400 * MS)),
    ("1h2m3s4ms5us6ns", 3600 * S + 2 * 60 * S + 3 * S + 4 * MS + 5 * US + 6), ("39h9m14.425s", (39 * 3600 + 9 * 60 + 14) * S + 425 * MS),
    ("52763797000ns", 52763797000), ("0.3333333333333333333h", 20 * 60 * S), ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", (1 << 63) - 1), ("9223372036854775.807us", (1 << 63) - 1),
    ("9223372036s854ms775us807ns", (1 << 63) - 1), ("-9223372036854775808ns", -(1 << 63)),
    ("-9223372036854775.808us", -(1 << 63)), ("-9223372036s854ms775us808ns", -(1 << 63)),
    ("-2562047h47m16.854775808s", -(1 << 63)), ("0.100000000000000000000h", 6 * 60 * S),
    ("0.830103483285477580700h", (49 * 60 + 48) * S + 372539827),
]  # fmt: skip
GO_INVALID = [
    ("", 'time: invalid duration ""'), ("3", 'time: missing unit in duration "3"'), ("-", 'time: invalid duration "-"'),
    ("s", 'time: invalid duration "s"'), (".", 'time: invalid duration "."'), ("-.", 'time: invalid duration "-."'),
    (".s", 'time: invalid duration ".s"'), ("+.s", 'time: invalid duration "+.s"'),
    ("1d", 'time: unknown unit "d" in duration "1d"'), ("soon", 'time: invalid duration "soon"'),
    ("99999999999h", 'time: invalid duration "99999999999h"'),
    ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
    ("9223372036854775.808us", 'time: invalid duration "9223372036854775.808us"'),
    ("9223372036854ms775us808ns", 'time: invalid duration "9223372036854ms775us808ns"'),
    ("-9223372036854775809ns", 'time: invalid duration "-9223372036854775809ns"'),
    ("1\x00s", 'time: unknown unit "\\x00s" in duration "1\\x00s"'),
]  # fmt: skip


@pytest.mark.parametrize(("text", "nanos"), GO_VALID)
def test_go_duration_table_valid(text, nanos):
    assert parse_go_duration(text) == nanos


@pytest.mark.parametrize(("text", "message"), GO_INVALID)
def test_go_duration_table_invalid_with_go_message(text, message):
    with pytest.raises(DurationError) as err:
        parse_go_duration(text)
    assert str(err.value) == message


def test_engine_and_admission_share_the_parser():
    assert parse_duration("1m30s") == 90.0
    policy = LifecyclePolicy(action="RestartJob", event="PodFailed", timeout="99999999999h")
    job = _job_with_policy(policy)
    with pytest.raises(ValueError, match=r'time: invalid duration "99999999999h"'):
        resolve(job, Request(event="PodFailed", task="worker"), version=0)


def _job_with_policy(policy):
    import msgspec

    raw = copy.deepcopy(SEED)
    raw["metadata"].update(namespace="default", uid="u1")
    raw["spec"]["policies"] = [msgspec.to_builtins(policy)]
    return msgspec.json.decode(msgspec.json.encode(raw), type=Job)


def seed(**changes):
    job = copy.deepcopy(SEED)
    job["metadata"]["namespace"] = "default"
    job["spec"]["queue"] = "default"
    for path, value in changes.items():
        node = job
        parts = path.split("__")
        for part in parts[:-1]:
            node = node[int(part)] if part.isdigit() else node[part]
        last = parts[-1]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return job


QUEUES = default_queues()


def test_webhook_denies_a_bad_timeout_with_go_message_only():
    verdict = validate_create(seed(spec__policies__0__timeout="soon"), queues=QUEUES)
    assert not verdict.allowed
    assert verdict.message == 'time: invalid duration "soon"'
    assert [p.field for p in verdict.problems] == ["spec.policies[0].timeout"]


def test_task_policy_timeout_is_checked_too():
    verdict = validate_create(seed(spec__tasks__0__policies__0__timeout="1d"), queues=QUEUES)
    assert verdict.message == 'time: unknown unit "d" in duration "1d"'
    assert verdict.problems[0].field == "spec.tasks[0].policies[0].timeout"


@pytest.mark.parametrize(("arg", "ok"), [("--port=65535", True), ("--port=1", True), ("--port=65536", False),
                                         ("--port=0", False), ("--port=-1", False)])
def test_plugin_ports_out_of_range_are_admitted_as_volcano_does_with_a_warning(arg, ok):
    """Volcano's webhook does not check plugin ports (its pytorch plugin uses them as given): admitted, warned."""
    job = seed(spec__plugins__pytorch__2=arg)
    assert validate_create(job, queues=QUEUES).allowed
    port = arg.split("=")[1]
    assert plugin_warnings(job) == ([] if ok else [(
        "spec.plugins.pytorch",
        f"pytorch plugin: -port={port} is not a port (1-65535): Volcano admits the job as it is, but the API server"
        f" will refuse its pods (containerPort: Invalid value: {port}: must be between 1 and 65535, inclusive)")])


def test_ray_and_ssh_ports_are_warned_ssh_falls_back_to_22():
    job = seed()
    job["spec"]["plugins"] = {"ssh": ["--ssh-port=70000"], "ray": ["--dashboardPort=99999"]}
    assert validate_create(job, queues=QUEUES).allowed
    warnings = plugin_warnings(job)
    assert [f for f, _ in warnings] == ["spec.plugins.ray", "spec.plugins.ssh"]
    assert warnings[1][1] == ("ssh plugin: -ssh-port=70000 is not a port (1-65535): Volcano falls back to port 22"
                              " (invalid ssh port 70000, falling back to default port 22 ...)")


def test_pod_limit_default_and_configurable():
    assert DEFAULT_MAX_PODS == 10_000
    at_limit = seed(spec__tasks__1__replicas=DEFAULT_MAX_PODS - 1)
    assert validate_create(at_limit, queues=QUEUES).allowed
    over = seed(spec__tasks__1__replicas=DEFAULT_MAX_PODS)
    verdict = validate_create(over, queues=QUEUES)
    assert not verdict.allowed
    assert verdict.message == (
        "job asks for 10001 pods (the sum of tasks[*].replicas), more than the limit of 10000 pods per job;"
    )
    assert verdict.problems[-1].field == "spec.tasks[*].replicas"
    assert validate_create(over, queues=QUEUES, max_pods=20_000).allowed
    assert not validate_create(seed(), queues=QUEUES, max_pods=2).allowed


def test_update_scaling_beyond_the_limit_is_denied():
    old = seed()
    new = seed(spec__tasks__1__replicas=50_000)
    verdict = validate_update(old, new)
    assert not verdict.allowed and "more than the limit of 10000 pods per job" in verdict.message
    assert validate_update(old, new, max_pods=100_000).allowed


def test_engine_guard_raises_for_a_job_over_the_limit():
    check_job_size(seed()["spec"])
    with pytest.raises(BoundsProblem, match="asks for 10000001 pods, more than the limit of 10000"):
        check_job_size(seed(spec__tasks__1__replicas=10_000_000)["spec"])


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"metadata": ["a"]}, "metadata"),
        ({"metadata": {"name": 2026}}, "metadata.name"),
        ({"metadata": {"name": "a", "namespace": ["x"]}}, "metadata.namespace"),
        ({"metadata": {"name": "a\x00b"}}, "metadata.name"),
        ({"metadata": {"name": "a", "labels": {"k\x00": "v"}}}, "metadata.labels.k\x00"),
        ({"metadata": {"name": "a"}, "spec": {"tasks": [{"name": "t\x00"}]}}, "spec.tasks[0].name"),
        ({"metadata": {"name": "a"}, "spec": "x"}, "spec"),
    ],
)
def test_object_shape_problems(obj, field):
    problems = object_problems(obj)
    assert problems and problems[0][0] == field
    verdict = validate_create({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", **obj}, queues=QUEUES)
    assert not verdict.allowed


def test_webhook_review_fails_closed_on_malformed_metadata():
    review = {"request": {"uid": "u", "operation": "CREATE", "resource": {"group": "batch.volcano.sh", "version": "v1alpha1",
                                                                          "resource": "jobs"},
                          "object": {**seed(), "metadata": ["a"]}}}
    for path in ("/jobs/mutate", "/jobs/validate"):
        answer = handle(path, review, queues=QueueIndex([]))["response"]
        assert answer["allowed"] is False
        assert answer["status"]["message"] == "metadata must be a mapping, not list"
    big = {"request": {**review["request"], "object": seed(spec__tasks__1__replicas=20_000)}}
    answer = handle("/jobs/validate", big, queues=default_queues(), settings=Settings(max_pods_per_job=50_000))
    assert answer["response"]["allowed"] is True
    answer = handle("/jobs/validate", big, queues=default_queues())
    assert "more than the limit of 10000 pods per job" in answer["response"]["status"]["message"]


# --- the CLI with the inputs: a clear line, exit 1 or 2, never a traceback ---------------


def _bomb() -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for name in "bcdefghi":
        text += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = name
    return text


def _inputs() -> dict[str, tuple[str, str, int]]:
    """name -> (file text, expected message fragment, exit code)."""
    def dump(job):
        return yaml.safe_dump(job)

    return {
        "soon": (dump(seed(spec__policies__0__timeout="soon")), 'time: invalid duration "soon"', 1),
        "huge-duration": (dump(seed(spec__policies__0__timeout="99999999999h")), 'invalid duration "99999999999h"', 1),
        "replicas-2^31": (dump(seed(spec__tasks__1__replicas=2**31)), 'must be of type int32: "2147483648"', 1),
        "replicas-2^64": (dump(seed(spec__tasks__1__replicas=2**64)), "must be of type int32", 1),
        "replicas-10M": (dump(seed(spec__tasks__1__replicas=10_000_000)), "more than the limit of 10000 pods per job", 1),
        "maxRetry-2^40": (dump(seed(spec__maxRetry=2**40)), "spec.maxRetry in body must be of type int32", 1),
        "port-70000": (dump(seed(spec__plugins__pytorch__2="--port=70000")), "-port=70000 is not a port (1-65535)", 0),
        "nul": (json.dumps(seed(metadata__name="x\x00y")), "metadata.name holds a NUL byte", 1),
        "metadata-list": (dump(seed(metadata=["a"])),
                          "json: cannot unmarshal array into Go value of type v1.ObjectMeta", 1),
        "name-int": (dump(seed(metadata__name=7)),
                     "json: cannot unmarshal number into Go struct field ObjectMeta.name of type string", 1),
        "deep": ("a: " + "[" * 3000 + "]" * 3000 + "\n", "nesting deeper than 100 levels", 2),
        "bomb": (_bomb(), "an alias bomb?", 2),
    }


CASES = _inputs()


def run(capsys, *argv):
    """The CLI in-process: an exception escaping `main` fails the test (it would be a traceback)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("command", ["validate", "render"])
def test_cli_answers_every_bad_input_without_traceback(tmp_path, capsys, name, command):
    text, fragment, code = CASES[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    got, both = run(capsys, command, str(path))
    assert got == code, both
    assert fragment in both


def test_cli_subprocess_prints_no_traceback(tmp_path):
    """One real process per command, for the exit path itself."""
    path = tmp_path / "meta.yaml"
    path.write_text(CASES["metadata-list"][0])
    for command in ("validate", "render"):
        proc = subprocess.run([sys.executable, "-m", "vcbus.cli.main", command, str(path)], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "cannot unmarshal array into Go value of type v1.ObjectMeta" in proc.stdout + proc.stderr


def test_unquoted_date_name_is_a_string_and_is_admitted(tmp_path, capsys):
    path = tmp_path / "date.yaml"
    path.write_text(yaml.safe_dump(seed()).replace("name: resnet-dist-train", "name: 2026-11-30"))
    code, both = run(capsys, "validate", str(path))
    assert code == 0, both
    assert "Job default/2026-11-30: ok" in both


def test_validate_max_pods_option(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(seed(spec__tasks__1__replicas=20_000)))
    assert run(capsys, "validate", str(path))[0] == 1
    assert run(capsys, "validate", str(path), "--max-pods-per-job", "30000")[0] == 0


@pytest.mark.k8s
@pytest.mark.parametrize("path", ["spec__tasks__1__replicas", "spec__maxRetry"])
def test_api_server_stores_an_int32_overflow_that_vcbus_refuses(k8s, k8s_namespace, path):
    """A difference, asserted: kube-apiserver 1.34 does not check `format: int32` on a CRD and stores
    2^31, which Volcano's webhook cannot decode into its int32 field; vcbus refuses it (structural.py)."""
    from kubernetes import client

    from statemachines.admission.schema import crd_defaults, schema_errors

    obj = seed(**{path: 2**31})
    obj["metadata"].update(namespace=k8s_namespace, name=f"int32-{path.split('__')[-1].lower()}")
    ours = [str(e) for e in schema_errors(crd_defaults(obj))]
    assert any('must be of type int32: "2147483648"' in e for e in ours), ours
    custom = client.CustomObjectsApi(k8s.api_client())
    stored = custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", k8s_namespace, "jobs", obj)
    node = stored
    for step in path.split("__"):
        node = node[int(step)] if step.isdigit() else node[step]
    assert node == 2**31
