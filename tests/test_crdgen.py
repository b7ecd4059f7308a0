"""The generated CRDs (scripts/gen-crds.py): current, from the pinned Kubernetes' schemas, and Volcano's examples fit.

* the generated files equal what the generator writes now (deploy/crds/*.yaml and the
  admission's statemachines/admission/crd_schemas.json: one source);
* the stored extract of Kubernetes' OpenAPI (deploy/crds/src/k8s-core-v1.json) equals what
  the test kube-apiserver serves at /openapi/v3/api/v1;
* the Job CRD carries Kubernetes' full pod template and PVC schemas (no preserve-unknown
  holes, no $ref), with Volcano's counts of constraints;
* Volcano's own example jobs (tests/data/volcano-examples/, from upstream's example/) and the
  seed job are accepted by the real API server with `fieldValidation=Strict` (an unknown field
  would be an error), and the server's defaults equal `crd_defaults` (vcbus validate's).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from statemachines.admission.schema import JOB_SCHEMA, crd_defaults, schema_errors
from tools.crdgen import generate
from tools.crdgen.describe import Describer, DescriptionError
from tools.crdgen.k8s import extract
from vcbus.k8s.watching import KubeApiError, api_request

REPO = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "tests" / "data" / "volcano-examples"
CONSTRAINTS = frozenset({
    "required", "enum", "format", "pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems",
    "default", "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
    "x-kubernetes-int-or-string", "anyOf",
})  # fmt: skip


def count(node, keys=CONSTRAINTS) -> dict[str, int]:
    """Validation keywords other than `type` in a schema (how docs/deploy.md compares with upstream)."""
    out: dict[str, int] = {}

    def walk(n):
        for k, v in n.items():
            if k in keys:
                out[k] = out.get(k, 0) + 1
            if k == "properties":
                for sub in v.values():
                    walk(sub)
            elif k in ("items", "additionalProperties") and isinstance(v, dict):
                walk(v)

    walk(node)
    return out


def crd(name: str) -> dict:
    (doc,) = [d for d in yaml.safe_load_all((REPO / "deploy" / "crds" / name).read_text()) if d]
    return doc


def test_generated_files_are_current():
    files = generate.render()
    assert set(files) >= {REPO / "statemachines" / "admission" / "crd_schemas.json",
                          REPO / "deploy" / "crds" / "batch.volcano.sh_jobs.yaml"}  # fmt: skip
    stale = [str(p.relative_to(REPO)) for p in generate.stale(files)]
    assert stale == [], f"run scripts/gen-crds.py: {stale} differ from what the generator writes"


def test_gen_crds_check_exits_zero_when_current_and_names_what_is_stale(tmp_path, monkeypatch, capsys):
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "gen-crds.py"), "--check"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # A stale output (here: a copy of the admission JSON with one byte changed) is named, exit 1.
    fake = tmp_path / "crd_schemas.json"
    fake.write_text(generate.ADMISSION_JSON.read_text().replace("int32", "int64", 1))
    monkeypatch.setattr(generate, "ADMISSION_JSON", fake)
    assert generate.main(["--check"]) == 1
    assert "crd_schemas.json is not current" in capsys.readouterr().err


def test_admission_reads_the_same_schemas_as_the_crds():
    job = crd("batch.volcano.sh_jobs.yaml")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    def strip(n):
        if isinstance(n, dict):
            return {k: strip(v) for k, v in n.items() if k != "description"}
        if isinstance(n, list):
            return [strip(v) for v in n]
        return n

    assert strip(job) == JOB_SCHEMA


def test_job_crd_has_the_full_pod_template_and_pvc_schemas():
    schema = crd("batch.volcano.sh_jobs.yaml")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    text = json.dumps(schema)
    assert "$ref" not in text and "x-kubernetes-preserve-unknown-fields" not in text
    task = schema["properties"]["spec"]["properties"]["tasks"]["items"]["properties"]
    stored = json.loads((REPO / "deploy" / "crds" / "src" / "k8s-core-v1.json").read_text())["schemas"]
    pod_spec = stored["io.k8s.api.core.v1.PodSpec"]
    template = task["template"]["properties"]["spec"]
    assert set(template["properties"]) == set(pod_spec["properties"])
    assert template["required"] == ["containers"]
    containers = template["properties"]["containers"]
    assert containers["x-kubernetes-list-type"] == "map" and containers["x-kubernetes-list-map-keys"] == ["name"]
    assert containers["items"]["required"] == ["name"]
    pvc = schema["properties"]["spec"]["properties"]["volumes"]["items"]["properties"]["volumeClaim"]
    assert set(pvc["properties"]) == set(stored["io.k8s.api.core.v1.PersistentVolumeClaimSpec"]["properties"])
    # Volcano's Job CRD (config/crd/volcano/bases, k8s.io/api v0.36) has 765 of these keywords; ours comes
    # from Kubernetes 1.34 and differs only by what changed between the two versions (docs/deploy.md).
    total = sum(count(schema).values())
    assert 700 <= total <= 830, count(schema)


def test_small_crds_have_volcanos_constraints():
    for name, expected in [("scheduling.volcano.sh_podgroups.yaml", 38), ("scheduling.volcano.sh_queues.yaml", 41),
                           ("bus.volcano.sh_commands.yaml", 2)]:  # upstream's counts, config/crd/volcano/bases
        schema = crd(name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert sum(count(schema).values()) == expected, (name, count(schema))


def test_a_bad_description_is_named():
    _, k8s = generate.load_k8s()
    with pytest.raises(DescriptionError, match=r"x.yaml: Spec.n: unknown type 'Nope'"):
        Describer("x.yaml", {"Root": {"fields": {"spec": "Spec"}}, "Spec": {"fields": {"n": "Nope"}}}, k8s).root("Root")
    with pytest.raises(DescriptionError, match=r"unknown keys \['minimun'\]"):
        Describer("x.yaml", {"Root": {"fields": {"n": {"type": "int32", "minimun": 0}}}}, k8s).root("Root")


@pytest.mark.k8s
def test_stored_kubernetes_schemas_equal_what_the_apiserver_serves(k8s):
    api = k8s.api_client()
    served = api_request(api, "GET", "/openapi/v3/api/v1")
    version = api_request(api, "GET", "/version")["gitVersion"]
    stored = json.loads((REPO / "deploy" / "crds" / "src" / "k8s-core-v1.json").read_text())
    assert stored["kubernetesVersion"] == version
    assert extract(served) == stored["schemas"]


def _example_jobs() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for i, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if d):
            if doc.get("kind") == "Job" and doc.get("apiVersion") == "batch.volcano.sh/v1alpha1":
                out.append((f"{path.stem}#{i}", doc))
    out.append(("seed:resnet-dist-train.yaml", yaml.safe_load((REPO / "examples" / "resnet-dist-train.yaml").read_text())))
    # The seed log examples/resnet-dist-train.json is a stream of watch events: its first Job, as a cluster stored it.
    text, decoder, at = (REPO / "examples" / "resnet-dist-train.json").read_text(), json.JSONDecoder(), 0
    while at < len(text.rstrip()):
        event, at = decoder.raw_decode(text, at)
        at = len(text) - len(text[at:].lstrip())
        obj = event.get("object") or {}
        if obj.get("kind") == "Job":
            out.append(("seed:resnet-dist-train.json", {k: v for k, v in obj.items() if k != "status"}))
            break
    return out


EXAMPLE_JOBS = _example_jobs()


def test_there_are_enough_examples():
    assert len(EXAMPLE_JOBS) >= 18


@pytest.mark.parametrize("doc", [d for _, d in EXAMPLE_JOBS], ids=[n for n, _ in EXAMPLE_JOBS])
def test_vcbus_schema_accepts_volcanos_examples(doc):
    assert schema_errors(crd_defaults(doc)) == []


@pytest.mark.k8s
def test_api_server_accepts_volcanos_examples_strictly_with_the_same_defaults(k8s, k8s_namespace):
    api = k8s.api_client()
    base = f"/apis/batch.volcano.sh/v1alpha1/namespaces/{k8s_namespace}/jobs"
    refused = {}
    for i, (name, doc) in enumerate(EXAMPLE_JOBS):
        body = json.loads(json.dumps(doc))
        body["metadata"] = {"name": f"example-{i}"}
        try:
            got = api_request(api, "POST", base, body=body, query={"fieldValidation": "Strict"})
        except KubeApiError as e:
            refused[name] = str(e)
            continue
        # Nothing pruned, and the server's defaults are vcbus's.
        assert got["spec"] == crd_defaults(body)["spec"], name
    # One upstream example has a typo Volcano's CRD hides (it prunes the field): `priorityClass` for
    # `priorityClassName`. Strict validation names it; a plain create prunes it, as with Volcano's CRD.
    typo = "kubecon-2019-china_task-priority_elastic-job#0"
    assert list(refused) == [typo]
    assert 'unknown field "spec.tasks[0].template.spec.priorityClass"' in refused[typo]
    body = json.loads(json.dumps(dict(EXAMPLE_JOBS)[typo]))
    got = api_request(api, "POST", base, body=body)
    assert "priorityClass" not in got["spec"]["tasks"][0]["template"]["spec"]
