"""`-o json|yaml` on the commands that lacked it (issue 29): `vcbus replay` and `vcbus validate`.

kubectl's rule (docs/cli.md "Output"): a command that prints objects prints them as JSON or YAML
on `-o json|yaml`, the same content either way; `--json` stays the same as `-o json`. Each
command runs as a user runs it (a subprocess on the examples).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOG = str(ROOT / "examples" / "abort-resume.jsonl")
JOB = str(ROOT / "examples" / "resnet-dist-train.yaml")


def vcbus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_replay_prints_its_report_as_json_or_yaml():
    contract = vcbus("replay", LOG, "--json")
    assert contract.returncode == 0, contract.stderr
    report = json.loads(contract.stdout)
    assert report["jobs"]
    as_json = vcbus("replay", LOG, "-o", "json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == report, as_json.stderr
    as_yaml = vcbus("replay", LOG, "-o", "yaml")
    assert as_yaml.returncode == 0 and yaml.safe_load(as_yaml.stdout) == report, as_yaml.stderr
    both = vcbus("replay", LOG, "--json", "-o", "yaml")
    assert both.returncode == 2 and both.stderr.startswith("error: --json and -o yaml") and both.stdout == ""


def test_replay_of_standard_input_with_o_yaml_reads_to_the_end_as_json_does():
    with open(LOG, "rb") as fh:
        data = fh.read()
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", "-", "-o", "yaml"], cwd=ROOT, input=data,
                         capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode()
    assert yaml.safe_load(res.stdout) == json.loads(vcbus("replay", LOG, "--json").stdout)


def test_validate_prints_its_findings_as_yaml_too():
    as_json = vcbus("validate", JOB, "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    as_yaml = vcbus("validate", JOB, "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)
