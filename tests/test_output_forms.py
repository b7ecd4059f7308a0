"""kubectl's `-o` on the offline commands that print objects: render -o name, schedule/why-pending -o yaml (--json kept)."""

from __future__ import annotations

import json
import pathlib

import yaml

from vcbus.cli.main import main

REPO = pathlib.Path(__file__).resolve().parents[1]
SEED = str(REPO / "examples" / "resnet-dist-train.yaml")
SNAPSHOT = str(REPO / "examples" / "scheduler" / "two-nodes.yaml")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_render_name_lists_each_object_as_kubectl_does(capsys):
    code, out, _ = run(capsys, "render", SEED, "-o", "json")
    objects = json.loads(out)["items"]
    code, out, _ = run(capsys, "render", SEED, "-o", "name")
    assert code == 0
    names = out.splitlines()
    assert len(names) == len(objects)
    assert names[0] == "job.batch.volcano.sh/resnet-dist-train" and "pod/resnet-dist-train-worker-1" in names
    assert any(n.startswith("podgroup.scheduling.volcano.sh/resnet-dist-train-") for n in names)
    assert any(n.startswith("networkpolicy.networking.k8s.io/") for n in names)
    code, out, _ = run(capsys, "render", SEED, "-o", "name", "--pod", "resnet-dist-train-worker-1")
    assert (code, out) == (0, "pod/resnet-dist-train-worker-1\n")


def test_schedule_yaml_is_the_json_document(capsys):
    _, as_json, _ = run(capsys, "schedule", SNAPSHOT, "--json")
    _, dash_o, _ = run(capsys, "schedule", SNAPSHOT, "-o", "json")
    code, as_yaml, _ = run(capsys, "schedule", SNAPSHOT, "-o", "yaml")
    assert code == 0 and json.loads(as_json) == json.loads(dash_o) == yaml.safe_load(as_yaml)
    code, _, err = run(capsys, "schedule", SNAPSHOT, "--json", "-o", "yaml")
    assert code == 2 and "--json and -o yaml ask for different outputs" in err


def test_why_pending_yaml_is_the_json_document(capsys):
    job = "default/resnet-dist-train"
    _, as_json, err = run(capsys, "why-pending", job, "--from", SNAPSHOT, "--json")
    assert json.loads(as_json)["why"], err
    code, as_yaml, _ = run(capsys, "why-pending", job, "--from", SNAPSHOT, "-o", "yaml")
    assert code == 0 and yaml.safe_load(as_yaml) == json.loads(as_json)
