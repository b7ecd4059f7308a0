"""Volcano's JobFlow webhook rule (statemachines/admission/jobflows.py), table-driven after Volcano's
`pkg/webhooks/admission/jobflows/validate/util_test.go` (TestIsDAG) and `validate_jobflow_test.go`
(TestValidateJobFlowCreate), and `vcbus validate` on JobFlow manifests (exit code, field, words)."""

from __future__ import annotations

import pytest

from statemachines.admission.jobflows import validate_jobflow
from tests.test_replay_cli import vcbus


def jobflow(graph: dict[str, list[str]] | list[tuple[str, list[str]]]) -> dict:
    items = graph.items() if isinstance(graph, dict) else graph
    return {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": "f", "namespace": "test"},
            "spec": {"flows": [{"name": n, **({"dependsOn": {"targets": t}} if t else {})} for n, t in items]}}


@pytest.mark.parametrize(("graph", "message"), [
    # TestIsDAG (its vertices are the flows, its edges their targets)
    ({"1": ["2"], "2": ["1", "3"]}, "jobflow Flow is not DAG: vertex is not defined: 3"),
    ({"1": ["2"], "2": ["3"], "3": ["1"]}, "jobflow Flow is not DAG"),
    ({"1": ["2"], "2": ["1", "3"], "3": []}, "jobflow Flow is not DAG"),
    ({"1": ["2", "3"], "2": ["3"], "3": ["4"], "4": []}, ""),
    ({"1": ["2", "3"], "2": ["4", "5"], "3": [], "4": [], "5": []}, ""),
    ({"1": ["2", "3", "4"], "2": ["3"], "3": ["4"], "4": ["5"], "5": []}, ""),
    ({"1": ["2", "3", "4"], "2": ["3", "5"], "3": ["5"], "4": ["3", "5"], "5": []}, ""),
    ({"1": ["2", "3", "4"], "2": ["3", "5"], "3": ["5"], "4": ["3", "5"], "5": ["5", "3"]}, "jobflow Flow is not DAG"),
    # TestValidateJobFlowCreate
    ({"a": [], "b": ["a"], "c": ["a", "b"], "d": ["b"], "e": ["c", "d"]}, ""),
    ([("a", []), ("a", []), ("b", ["a"]), ("c", ["a", "b"]), ("d", ["b"]), ("e", ["c", "d"])], ""),  # duplicate name
    ({"b": ["a"], "c": ["a", "b"], "d": ["b"], "e": ["c", "d"]}, "jobflow Flow is not DAG: vertex is not defined: a"),
    ({"a": ["b"], "b": ["a"], "c": ["a", "b"], "d": ["b"], "e": ["c", "d"]}, "jobflow Flow is not DAG"),
    ([("a", []), ("b", ["a"]), ("c", ["a"]), ("c", ["b"])], ""),  # two flows named c: the later one's targets
    ({"a": ["a"]}, "jobflow Flow is not DAG"),  # a flow waiting for itself
    ({}, ""),
])
def test_the_flows_must_form_a_dag(graph, message):
    assert validate_jobflow(jobflow(graph)) == message


def test_vcbus_validate_names_the_jobflow_and_its_field_and_exits_1(tmp_path):
    path = tmp_path / "flows.yaml"
    path.write_text(
        "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobFlow\nmetadata: {name: loop}\nspec:\n  flows:\n"
        "    - {name: a, dependsOn: {targets: [b]}}\n    - {name: b, dependsOn: {targets: [a]}}\n---\n"
        "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobFlow\nmetadata: {name: typed}\nspec:\n  flows:\n"
        "    - {name: a, dependsOn: {targets: b}}\n---\n"
        "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobFlow\nmetadata: {name: fine}\nspec:\n  flows: [{name: a}]\n")
    res = vcbus("validate", str(path))
    out, err = res.stdout.decode(), res.stderr.decode()
    assert res.returncode == 1 and "Traceback" not in err
    assert f"{path}:1: JobFlow loop: denied (CREATE)" in out
    assert 'admission webhook "validatejobflow.volcano.sh" denied the request: jobflow Flow is not DAG' in out
    assert "spec.flows[0].dependsOn.targets in body must be of type array" in out
    assert "JobFlow fine: ok" in out
