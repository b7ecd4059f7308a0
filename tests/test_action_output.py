"""`-o` on the action commands that print an object (issue 29), and one code path for every `-o` form.

`vcbus job delete -o json|yaml|name` prints the job the API server answered the DELETE with (`-o name`
as `kubectl delete -o name`); `vcbus poison retry -o json|yaml|name` the record it published, named
as `vcbus poison list -o name` names records. Run as a user runs them: a real API server, a real
nats-server. The last test reads vcbus/cli/: JSON and YAML are written by vcbus/cli/output.py alone.
"""

from __future__ import annotations

import ast
import json
import pathlib

import pytest
import yaml

from tests.fixtures_nats import vcbus_cli
from tests.test_job_cli import JOBS, kc, ok, vcjob  # noqa: F401 - kc is a fixture
from vcbus.k8s.watching import KubeApiError, api_request

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOG = ROOT / "examples" / "abort-resume.jsonl"


@pytest.mark.k8s
def test_job_delete_prints_the_deleted_job_as_asked(k8s, k8s_namespace, kc):  # noqa: F811
    ns = k8s_namespace
    api = k8s.api_client()
    for name in ("del-json", "del-yaml", "del-name"):
        api_request(api, "POST", JOBS.format(ns=ns), body=vcjob(name))
    as_json = json.loads(ok("job", "delete", f"{ns}/del-json", "-o", "json", *kc))
    assert (as_json["kind"], as_json["metadata"]["name"], as_json["metadata"]["namespace"]) == ("Job", "del-json", ns)
    as_yaml = yaml.safe_load(ok("job", "delete", "del-yaml", "-n", ns, "-o", "yaml", *kc))
    assert as_yaml["apiVersion"] == "batch.volcano.sh/v1alpha1" and as_yaml["metadata"]["name"] == "del-yaml"
    assert ok("job", "delete", f"{ns}/del-name", "-o", "name", *kc) == "job.batch.volcano.sh/del-name\n"
    for name in ("del-json", "del-yaml", "del-name"):  # each really went
        with pytest.raises(KubeApiError) as gone:
            api_request(api, "GET", JOBS.format(ns=ns) + f"/{name}")
        assert gone.value.status == 404


@pytest.mark.nats
def test_poison_retry_prints_the_record_it_published(bus_settings):
    url = bus_settings.nats_url
    published = vcbus_cli("publish", str(LOG), "--nats", url)
    assert published.returncode == 0, published.stderr.decode()
    first = json.loads(vcbus_cli("poison", "retry", "1", "--force", "-o", "json", "--nats", url).stdout)
    assert first["stream"] == "VCBUS_K8S" and first["retryOf"] == 1 and first["sequence"] > 1
    second = yaml.safe_load(vcbus_cli("poison", "retry", "2", "--force", "-o", "yaml", "--nats", url).stdout)
    assert second == {"stream": "VCBUS_K8S", "sequence": first["sequence"] + 1, "retryOf": 2}
    named = vcbus_cli("poison", "retry", "3", "--force", "-o", "name", "--nats", url)
    assert named.returncode == 0 and named.stdout.decode() == f"VCBUS_K8S/{first['sequence'] + 2}\n"


DUMPERS = {("json", "dumps"), ("json", "dump"), ("yaml", "safe_dump"), ("yaml", "dump"), ("json", "format")}
INLINE = {"job_view.py"}  # a value inside `vcbus job view`'s description (kubectl describe's), not an -o form


def test_json_and_yaml_are_written_in_one_place():
    """No command module dumps JSON or YAML itself: vcbus/cli/output.py holds the one code path."""
    found = []
    for path in sorted((ROOT / "vcbus" / "cli").glob("*.py")):
        if path.name == "output.py" or path.name in INLINE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                dotted = (owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", ""), node.func.attr)
                if dotted in DUMPERS:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {'.'.join(dotted)}")
    assert found == [], "print through vcbus.cli.output (print_document/document_text):\n" + "\n".join(found)
