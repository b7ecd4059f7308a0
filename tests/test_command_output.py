"""`-o json|yaml|name` on the commands that create a Command (issue 29): as `kubectl create -o`.

`vcbus job suspend|resume` and `vcbus queue open|close` print the Command the API server
created: the object itself as JSON or YAML, or `command.bus.volcano.sh/NAME`; without `-o`
the line they always printed. Run as a user runs them, against a real API server.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.test_job_cli import JOBS, QUEUES, commands, kc, ok, vcjob  # noqa: F401 - kc is a fixture
from vcbus.k8s.watching import api_request

pytestmark = pytest.mark.k8s


def test_suspend_and_resume_print_the_command_as_asked(k8s, k8s_namespace, kc):  # noqa: F811
    ns = k8s_namespace
    api = k8s.api_client()
    api_request(api, "POST", JOBS.format(ns=ns), body=vcjob("out"))
    as_json = json.loads(ok("job", "suspend", f"{ns}/out", "-o", "json", *kc))
    [stored] = commands(api, ns)
    assert as_json["kind"] == "Command" and as_json["action"] == "AbortJob"
    assert as_json["metadata"]["name"] == stored["metadata"]["name"] and as_json["target"] == stored["target"]
    as_yaml = yaml.safe_load(ok("job", "resume", f"{ns}/out", "-o", "yaml", *kc))
    assert as_yaml["action"] == "ResumeJob" and as_yaml["metadata"]["namespace"] == ns
    name = ok("job", "suspend", f"{ns}/out", "-o", "name", *kc).strip()
    assert name.startswith("command.bus.volcano.sh/out-abortjob-")
    assert {f"command.bus.volcano.sh/{c['metadata']['name']}" for c in commands(api, ns)} >= {name}


def test_queue_open_and_close_print_the_command_as_asked(k8s, kc):  # noqa: F811
    api = k8s.api_client()
    name = "q-out"
    api_request(api, "POST", QUEUES, body={"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                           "metadata": {"name": name}, "spec": {"weight": 1}})
    closed = json.loads(ok("queue", "close", name, "-o", "json", *kc))
    assert closed["action"] == "CloseQueue" and closed["target"]["name"] == name
    assert closed["metadata"]["name"] in {c["metadata"]["name"] for c in commands(api, "default")}
    opened = yaml.safe_load(ok("queue", "open", name, "-o", "yaml", *kc))
    assert opened["action"] == "OpenQueue" and opened["metadata"]["namespace"] == "default"
    assert ok("queue", "open", name, "-o", "name", *kc).strip().startswith(f"command.bus.volcano.sh/{name}-openqueue-")
