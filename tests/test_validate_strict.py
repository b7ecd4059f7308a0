"""Hostile and wrong inputs to `vcbus validate` and `vcbus render`, as a user feeds them (issues 29 and 31).

Each input is a real file and `vcbus` a real process (or click's runner through `main`, which
turns every exception into a failed test). The wording is the API server's and kubectl's: the
`k8s` tests give the same files to a real kube-apiserver (server-side field validation Strict,
dry run) and to the real kubectl, and compare.
"""

from __future__ import annotations

import gzip
import json
import pathlib
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import yaml

from statemachines.admission.gotime import rfc3339_error
from statemachines.admission.mutate import mutate_job
from statemachines.admission.queues import default_queues
from statemachines.admission.review import handle
from tests.test_deploy import kubectl_binary
from vcbus.cli.main import main

REPO = pathlib.Path(__file__).resolve().parents[1]
SEED_TEXT = (REPO / "examples" / "resnet-dist-train.yaml").read_text()
VCBUS = str(pathlib.Path(sys.executable).parent / "vcbus")


def edit(old: str, new: str) -> str:
    assert old in SEED_TEXT
    return SEED_TEXT.replace(old, new, 1)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def vcbus(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([VCBUS, *argv], capture_output=True, text=True, timeout=timeout)


def no_python(text: str) -> None:
    for word in ("Traceback", "Error(", "ValueError", "AttributeError", "TypeError", "KeyError", "RecursionError"):
        assert word not in text, text


TYPO = edit("  minAvailable: 3", "  minAvaliable: 3")
PULL = edit("              imagePullPolicy: IfNotPresent\n              name: master",
            "              imagePulPolicy: IfNotPresent\n              name: master")
DUPLICATE = edit("  minAvailable: 3", "  minAvailable: 3\n  minAvailable: 2")
JOBB = edit("kind: Job", "kind: Jobb")
WRONG_API = edit("apiVersion: batch.volcano.sh/v1alpha1", "apiVersion: batch.volcano.sh/v1")
NO_KIND = edit("kind: Job\n", "")
KIND_5 = edit("kind: Job", "kind: 5")
TIMESTAMP_5 = edit("  name: resnet-dist-train", "  name: resnet-dist-train\n  creationTimestamp: 5")
TIMESTAMP_SOON = edit("  name: resnet-dist-train", "  name: resnet-dist-train\n  creationTimestamp: soon")
STRICT = 'Job in version "v1alpha1" cannot be handled as a Job: '


# --- strict like kubectl ---------------------------------------------------------------------------


@pytest.mark.slow
def test_an_unknown_field_is_denied_with_kubectl_wording_and_its_line(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text(TYPO)
    done = vcbus("validate", str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[1:] == [
        f'  - spec.minAvaliable: unknown field "spec.minAvaliable" ({path}:10)',
        f'  kubectl would say: Error from server (BadRequest): error when creating "{path}": {STRICT}'
        'strict decoding error: unknown field "spec.minAvaliable"',
    ]
    rendered = vcbus("render", str(path))
    assert rendered.returncode == 1 and rendered.stdout == ""  # never both keys
    assert f'{path}:4: Job resnet-dist-train: {STRICT}strict decoding error: unknown field "spec.minAvaliable"' in rendered.stderr


def test_an_unknown_field_inside_the_pod_template_is_denied(tmp_path, capsys):
    path = tmp_path / "pull.yaml"
    path.write_text(PULL)
    code, out, _ = run(capsys, "validate", str(path))
    field = "spec.tasks[0].template.spec.containers[0].imagePulPolicy"
    assert code == 1
    assert f'  - {field}: unknown field "{field}" ({path}:35)' in out


def test_a_duplicated_key_is_denied_with_its_line_and_render_prints_neither(tmp_path, capsys):
    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATE)
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert f'  - spec.minAvailable: duplicate field "spec.minAvailable" ({path}:11)' in out
    assert f'{STRICT}strict decoding error: duplicate field "spec.minAvailable"' in out
    code, out, err = run(capsys, "render", str(path))
    assert code == 1 and out == "" and 'duplicate field "spec.minAvailable"' in err


def test_duplicates_and_unknown_fields_of_a_json_body_in_the_api_servers_order(tmp_path, capsys):
    body = ('{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","zzz":1,"metadata":{"name":"a","foo":1,'
            '"labels":{"x":"1","x":"2"}},"spec":{"tasks":[{"name":"t","replicas":1,"bogus":2,"template":{"spec":'
            '{"containers":[{"name":"c","image":"x","ports":[{"containerPort":1,"containerPort":2}]}]}}}],"queue":"q",'
            '"queue":"r"}}')
    path = tmp_path / "order.json"
    path.write_text(body)
    code, out, _ = run(capsys, "validate", "-o", "json", str(path))
    assert code == 1
    assert json.loads(out)[0]["message"] == STRICT + (
        'strict decoding error: duplicate field "metadata.labels.x", duplicate field '
        '"spec.tasks[0].template.spec.containers[0].ports[0].containerPort", duplicate field "spec.queue", '
        'unknown field "metadata.foo", unknown field "spec.tasks[0].bogus", unknown field "zzz"')


def test_a_queue_is_decoded_as_strictly(tmp_path, capsys):
    path = tmp_path / "queue.yaml"
    path.write_text("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata:\n  name: team\nspec:\n"
                    "  weight: 1\n  reclaimable: true\n  capabilty:\n    cpu: 4\n")
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert out.splitlines()[1:] == [
        f'  - spec.capabilty: unknown field "spec.capabilty" ({path}:8)',
        f'  kubectl would say: Error from server (BadRequest): error when creating "{path}": Queue in version "v1beta1"'
        ' cannot be handled as a Queue: strict decoding error: unknown field "spec.capabilty"',
    ]


@pytest.mark.parametrize(
    ("text", "field", "message", "kubectl"),
    [
        (JOBB, "kind", 'no matches for kind "Jobb" in version "batch.volcano.sh/v1alpha1"',
         'error: resource mapping not found for name: "resnet-dist-train" namespace: "" from "{path}": '
         'no matches for kind "Jobb" in version "batch.volcano.sh/v1alpha1"'),
        (WRONG_API, "kind", 'no matches for kind "Job" in version "batch.volcano.sh/v1"',
         'error: resource mapping not found for name: "resnet-dist-train" namespace: "" from "{path}": '
         'no matches for kind "Job" in version "batch.volcano.sh/v1"'),
        (NO_KIND, "kind", "kind not set",
         'error: error validating "{path}": error validating data: kind not set; if you choose to ignore these '
         "errors, turn validation off with --validate=false"),
        (KIND_5, "kind", "kind isn't string type",
         'error: error validating "{path}": error validating data: kind isn\'t string type; if you choose to ignore '
         "these errors, turn validation off with --validate=false"),
    ],
    ids=["Jobb", "wrong-apiVersion", "no-kind", "kind-5"],
)
def test_a_kind_kubectl_cannot_send_is_denied_not_skipped(tmp_path, capsys, text, field, message, kubectl):
    path = tmp_path / "kind.yaml"
    path.write_text(text)
    code, out, _ = run(capsys, "validate", "-o", "json", str(path))
    (result,) = json.loads(out)
    assert code == 1 and result["allowed"] is False
    assert [(p["field"], p["message"]) for p in result["problems"]] == [(field, message)]
    assert result["kubectl"].startswith(kubectl.format(path=path))
    code, _, err = run(capsys, "render", str(path))
    assert code == 1 and message in err


def test_objects_vcbus_does_not_check_fail_unless_skip_unknown(tmp_path, capsys):
    deployments = tmp_path / "deploy.yaml"
    deployments.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n---\n"
                           "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: db\n")
    code, out, err = run(capsys, "validate", str(deployments))
    assert code == 2 and out == ""
    assert err == (f"error: {deployments}: holds 2 Deployment (apps/v1), nothing vcbus checks: give "
                   "batch.volcano.sh/v1alpha1 Job or scheduling.volcano.sh/v1beta1 Queue manifests (YAML or JSON), "
                   "e.g. examples/resnet-dist-train.yaml\n")
    code, _, err = run(capsys, "render", str(deployments))
    assert code == 2 and "holds 2 Deployment (apps/v1), no batch.volcano.sh/v1alpha1 Job to render" in err
    code, out, _ = run(capsys, "validate", "--skip-unknown", str(deployments))
    assert code == 0 and out.count(": skipped (not checked: vcbus checks") == 2


def test_annotations_over_256_kib_are_refused_as_the_api_server_does(tmp_path, capsys):
    job = yaml.safe_load(SEED_TEXT)
    job["metadata"]["annotations"] = {"note": "x" * (256 * 1024)}
    path = tmp_path / "annotated.yaml"
    path.write_text(yaml.safe_dump(job))
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert ('kubectl would say: Job.batch.volcano.sh "resnet-dist-train" is invalid: metadata.annotations: '
            "Too long: may not be more than 262144 bytes") in out
    job["metadata"]["annotations"] = {"note": "x" * (256 * 1024 - 4)}  # exactly the limit: admitted
    path.write_text(yaml.safe_dump(job))
    assert run(capsys, "validate", str(path))[0] == 0


def test_an_object_over_1_5_mib_is_refused_as_etcd_does(tmp_path, capsys):
    job = yaml.safe_load(SEED_TEXT)
    job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["args"] = ["y" * 1000] * 1600
    path = tmp_path / "big.json"
    path.write_text(json.dumps(job))
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert "etcdserver: request is too large (the object is 1,605,708 bytes as JSON; etcd stores at most 1,572,864, 1.5 MiB)" in out


# --- no Python in messages ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("replicas: 2", "replicas: two",
         'spec.tasks[1].replicas: Invalid value: "string": spec.tasks[1].replicas in body must be of type integer: "string"'),
        ('  plugins:\n    pytorch: ["--master=master", "--worker=worker", "--port=23456"]\n    status-mounter: '
         '["-statusJson=true", "-mountPoint=/status", "-values=retryCount,pending,running"]', "  plugins: [pytorch]",
         'spec.plugins: Invalid value: "array": spec.plugins in body must be of type object: "array"'),
        (SEED_TEXT[SEED_TEXT.index("  tasks:"):], '  tasks: "abc"\n',
         'spec.tasks: Invalid value: "string": spec.tasks in body must be of type array: "string"'),
        (SEED_TEXT[SEED_TEXT.rindex("      template:"):], "      template: 5\n",
         'spec.tasks[1].template: Invalid value: "integer": spec.tasks[1].template in body must be of type object: "integer"'),
    ],
    ids=["replicas-two", "plugins-list", "tasks-string", "template-5"],
)
@pytest.mark.parametrize("command", ["validate", "render"])
def test_a_wrong_type_names_the_field_and_the_type(tmp_path, capsys, command, old, new, expected):
    path = tmp_path / "typed.yaml"
    path.write_text(edit(old, new))
    code, out, err = run(capsys, command, str(path))
    assert code == 1
    assert f'Job.batch.volcano.sh "resnet-dist-train" is invalid: {expected}' in out + err
    no_python(out + err)


def test_the_webhook_refuses_a_wrong_type_with_the_field_and_the_type():
    job = yaml.safe_load(edit("replicas: 2", "replicas: two"))
    review = {"request": {"uid": "u", "operation": "CREATE", "object": job,
                          "resource": {"group": "batch.volcano.sh", "version": "v1alpha1", "resource": "jobs"}}}
    for path in ("/jobs/mutate", "/jobs/validate"):
        answer = handle(path, review, queues=default_queues())["response"]
        assert answer["allowed"] is False
        assert answer["status"]["message"] == (
            'Job.batch.volcano.sh "resnet-dist-train" is invalid: spec.tasks[1].replicas: Invalid value: "string": '
            'spec.tasks[1].replicas in body must be of type integer: "string"')


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TIMESTAMP_5, "json: cannot unmarshal number into Go struct field ObjectMeta.creationTimestamp of type string"),
        (TIMESTAMP_SOON, 'parsing time "soon" as "2006-01-02T15:04:05Z07:00": cannot parse "soon" as "2006"'),
    ],
    ids=["number", "not-a-time"],
)
def test_a_timestamp_of_the_wrong_type_is_refused_in_gos_words(tmp_path, capsys, text, message):
    path = tmp_path / "ts.yaml"
    path.write_text(text)
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert f"  - metadata.creationTimestamp: {message} ({path}:8)" in out
    client = message.replace("ObjectMeta.", "ObjectMeta.metadata.")  # kubectl decodes the metadata before sending
    assert f'kubectl would say: error: unable to decode "{path}": {client}' in out


def test_a_status_time_that_does_not_parse_is_refused_as_volcanos_decoding_would(tmp_path, capsys):
    """The API server drops a created job's status, but Volcano's mutating webhook decodes it first."""
    path = tmp_path / "status.yaml"
    path.write_text(SEED_TEXT + "status:\n  state:\n    lastTransitionTime: soon\n")
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    assert (f'  - status.state.lastTransitionTime: Invalid value: "soon": parsing time "soon" as '
            f'"2006-01-02T15:04:05Z07:00": cannot parse "soon" as "2006" ({path}:51)') in out
    assert "in a cluster Volcano's webhook refuses it first" in out


# --- empty and foreign inputs ---------------------------------------------------------------------------


@pytest.mark.slow
def test_empty_gzip_and_binary_files_exit_2_saying_what_they_are(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    packed = tmp_path / "job.yaml.gz"
    packed.write_bytes(gzip.compress(SEED_TEXT.encode()))
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)))
    expected = {
        empty: f"error: {empty}: no objects in it (empty, or only comments): give batch.volcano.sh/v1alpha1 Job or "
               "scheduling.volcano.sh/v1beta1 Queue manifests (YAML or JSON), e.g. examples/resnet-dist-train.yaml\n",
        packed: f"error: {packed}: gzip-compressed data, not a YAML or JSON manifest: decompress it first "
                f"(`gunzip -c {packed} | vcbus validate -`)\n",
        binary: f"error: {binary}: binary data or another encoding (not UTF-8: invalid start byte at byte 128), "
                "not a YAML or JSON manifest (kubectl reads UTF-8)\n",
    }
    for path, message in expected.items():
        done = vcbus("validate", str(path))
        assert (done.returncode, done.stdout, done.stderr) == (2, "", message)
    done = subprocess.run([VCBUS, "render", "-"], input=gzip.compress(SEED_TEXT.encode()), capture_output=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.decode() == ("error: -: gzip-compressed data, not a YAML or JSON manifest: decompress it first "
                                    "(`gunzip -c FILE | vcbus render -`)\n")


def test_every_file_given_must_hold_an_object(tmp_path, capsys):
    job, empty = tmp_path / "job.yaml", tmp_path / "empty.yaml"
    job.write_text(SEED_TEXT)
    empty.write_text("")
    code, out, err = run(capsys, "validate", str(job), str(empty))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {empty}: no objects in it (empty, or only comments): give ")


# --- bad inputs that crashed or hung (issue 31) ---------------------------------------------------------------


@pytest.mark.parametrize("depth", [5_000, 100_000])
@pytest.mark.parametrize("command", ["validate", "render"])
def test_json_nested_thousands_deep_is_refused_not_a_recursion_error(tmp_path, command, depth):
    path = tmp_path / "deep.json"
    path.write_text('{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec":\n' + "[" * depth + "]" * depth + "}")
    done = vcbus(command, str(path))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"error: {path}:2: nesting deeper than 100 levels\n"


@pytest.mark.parametrize("command", ["validate", "render"])
def test_a_nul_byte_in_yaml_is_named_with_its_line(tmp_path, command):
    path = tmp_path / "nul.yaml"
    path.write_text(edit("name: resnet-dist-train", "name: resnet\x00dist"))
    done = vcbus(command, str(path))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"error: {path}:7:15: document 1: a NUL byte, which YAML does not allow (binary data? write "
                           "it as \\u escapes in a quoted string, or base64 in a Secret's data)\n")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["validate", "render"])
def test_a_50_mb_single_line_document_is_refused_up_front(tmp_path, command):
    path = tmp_path / "long.yaml"
    path.write_text("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j, annotations: {a: "
                    + "x" * 50_000_000 + "}}\n")
    done = vcbus(command, str(path), timeout=60)  # it ran past 20 s before; now it does not parse it at all
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"error: {path}:1: document 1: 47.7 MiB of YAML, more than the API server accepts in one "
                           "request (3 MiB; etcd stores at most 1.5 MiB per object)\n")


@pytest.mark.slow
def test_a_yaml_list_over_3_mib_is_read_and_each_item_is_sized_on_its_own(tmp_path, capsys):
    text = "apiVersion: v1\nkind: List\nitems:\n"
    for name in ("a", "b"):
        text += (f"- apiVersion: batch.volcano.sh/v1alpha1\n  kind: Job\n  metadata:\n    name: {name}\n"
                 f"    annotations:\n      note: {'x' * 2_000_000}\n")
    path = tmp_path / "list.yaml"
    path.write_text(text)
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 1
    # 2 jobs, 2 lines each: the API server's metadata check answers before etcd would refuse 2 MB
    assert out.count("metadata.annotations: Too long: may not be more than 262144 bytes") == 4
    assert f"{path}:4: Job a: denied" in out and f"{path}:10: Job b: denied" in out


@pytest.mark.slow
def test_a_50_mb_json_object_is_refused_up_front(tmp_path, capsys):
    job = yaml.safe_load(SEED_TEXT)
    job["metadata"]["labels"] = {f"k{i}": "v" * 60 for i in range(700_000)}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(job))
    code, out, err = run(capsys, "validate", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {path}:1: 50.0 MiB of JSON, more than the API server accepts in one request")


@pytest.mark.parametrize(
    ("old", "new", "warning"),
    [
        ("--port=23456", "--port=70000",
         "spec.plugins.pytorch: pytorch plugin: -port=70000 is not a port (1-65535): Volcano admits the job as it is, "
         "but the API server will refuse its pods (containerPort: Invalid value: 70000: must be between 1 and 65535, "
         "inclusive) ({path}:21)"),
        ("--port=23456", "--port=abc",
         'spec.plugins.pytorch: pytorch plugin: invalid value "abc" for flag -port: parse error (Volcano logs it and '
         "uses the defaults from there on) ({path}:21)"),
        ('status-mounter: ["-statusJson=true", "-mountPoint=/status", "-values=retryCount,pending,running"]',
         'ssh: ["--ssh-port=70000"]',
         "spec.plugins.ssh: ssh plugin: -ssh-port=70000 is not a port (1-65535): Volcano falls back to port 22 "
         "(invalid ssh port 70000, falling back to default port 22 ...) ({path}:22)"),
    ],
    ids=["pytorch-70000", "pytorch-abc", "ssh-70000"],
)
def test_invalid_plugin_ports_are_admitted_as_volcano_does_with_a_warning(tmp_path, capsys, old, new, warning):
    path = tmp_path / "ports.yaml"
    path.write_text(edit(old, new))
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 0
    assert out == f"{path}:4: Job resnet-dist-train: ok\n  warning: {warning.format(path=path)}\n"
    code, out, err = run(capsys, "render", str(path), "-o", "name")
    assert code == 0 and "pod/resnet-dist-train-master-0" in out
    assert err.startswith(f"warning: {path}:4: spec.plugins.")


def test_the_webhook_admits_an_invalid_plugin_port_with_a_warning():
    job = yaml.safe_load(edit("--port=23456", "--port=70000"))
    job["metadata"]["namespace"] = "default"  # as the API server sends it
    job = mutate_job(job)  # as the mutating webhook left it
    review = {"request": {"uid": "u", "operation": "CREATE", "object": job,
                          "resource": {"group": "batch.volcano.sh", "version": "v1alpha1", "resource": "jobs"}}}
    answer = handle("/jobs/validate", review, queues=default_queues())["response"]
    assert answer["allowed"] is True
    assert answer["warnings"] == [
        "pytorch plugin: -port=70000 is not a port (1-65535): Volcano admits the job as it is, but the API server will"
        " refuse its pods (containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive)"]


def test_go_rfc3339_parse_errors():
    assert rfc3339_error("2026-11-30T08:00:00Z") == rfc3339_error("2026-11-30T8:00:00.1234567891+01:00") == ""
    assert rfc3339_error("2026-13-30T08:00:00Z") == 'parsing time "2026-13-30T08:00:00Z": month out of range'
    assert rfc3339_error("2026-11-31T08:00:00Z") == 'parsing time "2026-11-31T08:00:00Z": day out of range'
    assert rfc3339_error("2026-11-30T08:00:00") == (
        'parsing time "2026-11-30T08:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"')


# --- the same files to a real kube-apiserver and the real kubectl ------------------------------------------------


def _post(k8s, namespace: str, body: bytes) -> str:
    """POST `body` as a vcjob, dry run, strict field validation: the API server's message ("" when accepted)."""
    url = f"{k8s.url}/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs?dryRun=All&fieldValidation=Strict"
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    context: ssl.SSLContext = k8s._ssl_context()
    try:
        with urllib.request.urlopen(request, context=context, timeout=60):
            return ""
    except urllib.error.HTTPError as err:
        return json.loads(err.read())["message"]


RAW_BODIES = {
    "order": ('{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","zzz":1,"metadata":{"name":"a","foo":1,'
              '"labels":{"x":"1","x":"2"}},"spec":{"tasks":[{"name":"t","replicas":1,"bogus":2,"template":{"spec":'
              '{"containers":[{"name":"c","image":"x","imagePulPolicy":"A"}]},"metadata":{"generateName":"g"}}}],'
              '"queue":"q","queue":"r"}}'),
    "owner": ('{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","metadata":{"name":"a","ownerReferences":'
              '[{"apiVersion":"v1","kind":"A","name":"b","uid":"c","controller":"x"}]},"spec":{"tasks":[]}}'),
    "generation": '{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","metadata":{"name":"a","generation":1.5}}',
    "labels": '{"apiVersion":"batch.volcano.sh/v1alpha1","kind":"Job","metadata":{"name":"a","labels":{"a":5}}}',
}
TIMES = ["soon", "", "2026-11-30 08:00:00Z", "2026-11-30T08:00:00", "2026-11-30T08:00:00z", "2026-13-30T08:00:00Z",
         "2026-11-31T08:00:00Z", "2026-11-30T25:00:00Z", "2026-11-30T08:00:00+25:00", "2026-11-30T08:00:00Zjunk",
         "26-11-30T08:00:00Z", "2026-11-30T8:00:00Z", "2026-11-30T08:00:00.123456789+01:00"]


@pytest.mark.k8s
def test_the_api_server_gives_the_same_decoding_messages(k8s, k8s_namespace, tmp_path, capsys):
    bodies = dict(RAW_BODIES)
    for i, stamp in enumerate(TIMES):
        bodies[f"time-{i}"] = json.dumps({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                          "metadata": {"name": "a", "creationTimestamp": stamp}, "spec": {"tasks": []}})
    for name, body in bodies.items():
        theirs = _post(k8s, k8s_namespace, body.encode())
        path = tmp_path / f"{name}.json"
        path.write_text(body)
        (result,) = _result(capsys, path)
        assert (result["message"] if result["allowed"] is False else "") == theirs, name


def _result(capsys, path: pathlib.Path) -> list[dict]:
    main(["validate", "-o", "json", str(path)])
    return json.loads(capsys.readouterr().out)


@pytest.mark.k8s
@pytest.mark.parametrize(
    "text", [TYPO, PULL, JOBB, WRONG_API, NO_KIND, KIND_5, TIMESTAMP_5, TIMESTAMP_SOON],
    ids=["typo", "pull", "Jobb", "wrong-apiVersion", "no-kind", "kind-5", "timestamp-5", "timestamp-soon"],
)
def test_kubectl_says_what_validate_says_it_would(k8s, k8s_namespace, tmp_path, capsys, text):
    path = tmp_path / "job.yaml"
    path.write_text(text.replace("  name: resnet-dist-train", f"  name: resnet-dist-train\n  namespace: {k8s_namespace}", 1))
    done = subprocess.run([kubectl_binary(), "--kubeconfig", str(k8s.kubeconfig), "create", "--dry-run=server", "-f",
                           str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    (result,) = _result(capsys, path)
    assert result["allowed"] is False
    assert done.stderr.strip() == result["kubectl"]


def _create(k8s, namespace: str, body: bytes) -> str:
    """POST `body` as a vcjob for real (etcd's size limit holds only for a write that is stored): the API
    server's message ("" when it was created, then deleted again)."""
    url = f"{k8s.url}/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs?fieldValidation=Strict"
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, context=k8s._ssl_context(), timeout=60):
            pass
    except urllib.error.HTTPError as err:
        return json.loads(err.read())["message"]
    name = json.loads(body)["metadata"]["name"]
    gone = urllib.request.Request(f"{url.split('?')[0]}/{name}", method="DELETE")
    urllib.request.urlopen(gone, context=k8s._ssl_context(), timeout=60).close()
    return ""


@pytest.mark.k8s
@pytest.mark.slow
def test_the_size_limits_answer_in_the_api_servers_order(k8s, k8s_namespace, tmp_path, capsys):
    """The API server validates the metadata (annotations over 256 KiB) before anything is stored, and
    etcd refuses an object over 1.5 MiB only when it is written: an object that breaks both is answered
    with the annotations' error; one over 1.5 MiB that a rule denies, with the rule's."""
    job = mutate_job(yaml.safe_load(SEED_TEXT))
    job["metadata"]["namespace"] = k8s_namespace
    bodies = {}
    annotated = json.loads(json.dumps(job))
    annotated["metadata"]["annotations"] = {f"note-{i}": "x" * 200_000 for i in range(8)}  # 1.6 MB, both limits
    bodies["annotations"] = annotated
    big = json.loads(json.dumps(job))
    big["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["args"] = ["y" * 1000] * 1600
    bodies["large"] = big
    for name, obj in bodies.items():
        body = json.dumps(obj)
        assert len(body) > 1536 * 1024
        theirs = _create(k8s, k8s_namespace, body.encode())
        path = tmp_path / f"{name}.json"
        path.write_text(body)
        (result,) = _result(capsys, path)
        assert theirs and theirs in result["message"], (name, theirs, result["message"])
    # too large and denied by Volcano's webhook (no such rule runs in this API server: vcbus's answer only)
    big["spec"]["minAvailable"] = 99
    path = tmp_path / "denied.json"
    path.write_text(json.dumps(big))
    (result,) = _result(capsys, path)
    assert "etcdserver" not in result["message"] and "minAvailable" in result["message"], result["message"]
