"""`vcbus webhook` at `/jobflows/validate`: Volcano's JobFlow webhook (validatejobflow.volcano.sh) over HTTPS."""

from __future__ import annotations

from tests.test_webhook import answer, review, server, tls  # noqa: F401 - the module's fixtures

JOBFLOWS = ("flow.volcano.sh", "v1alpha1", "jobflows")


def jobflow(*flows):
    return {"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": "f", "namespace": "ns"},
            "spec": {"flows": list(flows)}}


def test_a_dag_is_admitted_on_create_and_update(server, tls):
    for operation in ("CREATE", "UPDATE"):
        got = answer(server, tls, "/jobflows/validate",
                     review(jobflow({"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}), operation=operation,
                            resource=JOBFLOWS))
        assert got == {"uid": "u-1", "allowed": True}


def test_an_undefined_target_and_a_cycle_are_denied_in_volcanos_words(server, tls):
    got = answer(server, tls, "/jobflows/validate",
                 review(jobflow({"name": "b", "dependsOn": {"targets": ["a"]}}), resource=JOBFLOWS))
    assert got["allowed"] is False and got["status"]["message"] == "jobflow Flow is not DAG: vertex is not defined: a"
    got = answer(server, tls, "/jobflows/validate",
                 review(jobflow({"name": "a", "dependsOn": {"targets": ["a"]}}), resource=JOBFLOWS, operation="UPDATE"))
    assert got["status"]["message"] == "jobflow Flow is not DAG"


def test_other_operations_resources_and_types_are_refused(server, tls):
    got = answer(server, tls, "/jobflows/validate", review(jobflow(), resource=JOBFLOWS, operation="DELETE"))
    assert got["status"]["message"] == "expect operation to be 'CREATE' or 'UPDATE'"
    got = answer(server, tls, "/jobflows/validate", review(jobflow()))  # a vcjob's resource
    assert got["status"]["message"] == "expect resource to be flow.volcano.sh/v1alpha1, Resource=jobflows"
    got = answer(server, tls, "/jobflows/validate", review(jobflow({"name": 5}), resource=JOBFLOWS))
    assert got["allowed"] is False and "spec.flows[0].name" in got["status"]["message"]
