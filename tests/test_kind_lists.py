"""The kinds the help texts name are the kinds the code reads: `vcbus record --kind` lists every
resource the bridge can watch, and `vcbus schedule`'s kubectl line every kind its snapshot reader
folds for the scheduler."""

from __future__ import annotations

import re

from click.testing import CliRunner

from vcbus.cli.main import cli
from vcbus.k8s.watching import RESOURCES, resource_kind
from vcbus.snapshots import SCHEDULER_KINDS


def help_text(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_record_kind_help_names_every_watchable_resource():
    text = help_text("record")
    listed = re.search(r"Only these kinds \(repeatable; ([^)]*)", text)
    assert listed is not None, text
    names = {name.strip() for name in listed.group(1).split(";")[0].split(",")}
    assert names == set(RESOURCES)


def test_schedules_kubectl_line_names_every_kind_the_scheduler_reads():
    text = help_text("schedule")
    line = re.search(r"kubectl get ([a-z,]+) .*-A -o json \| vcbus schedule -", text)
    assert line is not None, text
    assert {resource_kind(name).kind for name in line.group(1).split(",")} == set(SCHEDULER_KINDS)
