"""The text report of a large replay costs no more than twice `--json` (issue 29), laid out as before.

The report was laid out as rich tables, which measured and rendered every cell: 90% of a large log's
replay (17.7 s of CPU against 5.2 s for `--json` on benchmarks/out/replay-600.jsonl). It is now
written as plain aligned lines (vcbus/cli/textcols.py), byte for byte the lines rich printed, less
their trailing blanks; ANSI styles only on a terminal.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import pty
import subprocess
import sys
import time

from rich.text import Text

from tests.ptyio import read_to_end
from vcbus.cli.output import print_document
from vcbus.cli.textcols import styled, table, wrap
from vcbus.cli.timeline import print_report
from vcbus.replaying import replay_inputs
from vcbus.watchlog import open_input

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "resnet-dist-train.json"


def cpu(fn, rounds: int = 3) -> float:
    """The least CPU time of `rounds` runs of `fn` (standard output to /dev/null): the work, not the machine."""
    best = float("inf")
    for _ in range(rounds):
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            start = time.process_time()
            fn()
            best = min(best, time.process_time() - start)
    return best


def test_the_text_report_of_a_large_replay_costs_at_most_twice_json(many_jobs_log):
    stream, source = open_input(str(many_jobs_log))
    with stream:
        start = time.process_time()
        result = replay_inputs([(stream, source)])
        report = result.report()
        replay = time.process_time() - start
    rows = sum(len(j["actions"]) + len(j["history"]) for j in report["jobs"])
    assert len(report["jobs"]) == 30 and rows > 1000  # a report of some size
    as_json = cpu(lambda: print_document(report, "json"))
    as_text = cpu(lambda: print_report(report, explain=False, compare=False, all_actions=False))
    assert replay + as_text <= 2 * (replay + as_json), (replay, as_text, as_json)


def test_columns_are_aligned_wrapped_at_words_and_carry_no_trailing_blanks():
    rows = [("2", "08:00", "  retryCount 0; because new job: first sync", "Pending"),
            ("123", "", "create pods a, b", "")]
    lines = list(table(rows, header=("seq", "time", "what happened", "phase"), right=(0,), wrap_column=2,
                       width=40, color=False))
    assert lines == [
        "seq  time   what happened        phase",
        "  2  08:00    retryCount 0;      Pending",
        "            because new job:",
        "            first sync",
        "123         create pods a, b",
    ]
    assert wrap("  a bb ccc", 5) == ["  a", "bb", "ccc"]  # the line's leading blanks kept, blanks at a break dropped
    assert wrap("abcdefgh", 3) == ["abc", "def", "gh"]  # a word longer than the column is cut
    assert wrap("one\n    - two", 80) == ["one", "    - two"]


def test_styles_are_ansi_on_a_terminal_only():
    phase = Text.assemble(Text("Pending", style="yellow"), " -> ", Text("Running", style="green"))
    assert styled(phase, False) == "Pending -> Running"
    assert styled(phase, True) == "\x1b[33mPending\x1b[0m -> \x1b[32mRunning\x1b[0m"
    assert styled("seq", True, "dim") == "\x1b[2mseq\x1b[0m" and styled("seq", False, "dim") == "seq"


def test_replay_on_a_terminal_is_in_colour_and_in_a_file_plain(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    piped = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", str(SEED)], cwd=ROOT,
                           capture_output=True, timeout=120, env=env)
    assert piped.returncode == 0 and b"\x1b[" not in piped.stdout and b"Running -> Restarting" in piped.stdout
    assert all(line == line.rstrip() for line in piped.stdout.decode().splitlines())
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "vcbus.cli.main", "replay", str(SEED)], cwd=ROOT, stdin=child,
                            stdout=child, stderr=subprocess.DEVNULL, env={**env, "COLUMNS": "200"})
    os.close(child)
    out = read_to_end(main)
    os.close(main)
    assert proc.wait(timeout=120) == 0
    assert b"\x1b[35mRestarting\x1b[0m" in out and b"\x1b[1mdefault/resnet-dist-train\x1b[0m" in out


def test_a_report_of_several_jobs_starts_with_a_line_per_job(tmp_path):
    from tests.test_replay_html_index import three_jobs

    log = three_jobs(tmp_path)  # the seed job in three namespaces, the one in default diverging
    run = lambda *a: subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", str(log), *a],  # noqa: E731
                                    cwd=ROOT, capture_output=True, timeout=120)
    jobs = __import__("json").loads(run("--json").stdout)["jobs"]
    lines = run().stdout.decode().splitlines()
    assert lines[1] == "" and lines[2].split() == ["job", "phase", "retryCount", "restarts", "divergences"]
    summary = [line.split() for line in lines[3:3 + len(jobs)]]
    assert summary == [[f"{j['namespace']}/{j['name']}", j["status"]["state"]["phase"], str(j["status"]["retryCount"]),
                        str(sum(h["to"] == "Restarting" for h in j["history"])), str(len(j["divergences"]))]
                       for j in jobs]
    assert [s[-1] for s in summary] == [str(len(jobs[0]["divergences"])), "0", "0"] and jobs[0]["divergences"]
    assert lines[3 + len(jobs)] == "" and lines[4 + len(jobs)] == "default/resnet-dist-train"
    one = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", str(SEED)], cwd=ROOT, capture_output=True,
                         timeout=120).stdout.decode().splitlines()
    assert one[2] == "default/resnet-dist-train"  # one job: no summary
