"""The text report of a large replay is laid out in one pass over its rows and written in pieces (issue 29).

The report was laid out as rich tables, which measured and rendered every cell: 90% of a large log's
replay (17.7 s of CPU against 5.2 s for `--json` on benchmarks/out/replay-600.jsonl). It is now
written as plain aligned lines (vcbus/cli/textcols.py), byte for byte the lines rich printed, less
their trailing blanks; ANSI styles only on a terminal. What that costs against `--json` is measured
by benchmarks/replay_text.py (its `ratio`, target <= 2); here is what the design guarantees: the
work grows with the rows and nothing else, the output goes out in pieces, rich's layout is not used.
"""

from __future__ import annotations

import contextlib
import copy
import os
import pathlib
import pty
import subprocess
import sys

import pytest
from rich.text import Text

from tests.ptyio import read_to_end
from vcbus.cli import textcols
from vcbus.cli.textcols import styled, table, wrap
from vcbus.cli.timeline import print_report
from vcbus.replaying import replay_inputs
from vcbus.watchlog import open_input

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = ROOT / "examples" / "resnet-dist-train.json"


class Writes:
    """A real stream that keeps each write: what the report hands to standard output, and in how many pieces."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def write(self, text: str) -> int:
        self.pieces.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def copies(report: dict, k: int) -> dict:
    """The report's jobs `k` times over, each copy in its own namespace (names of equal length)."""
    jobs = []
    for i in range(k):
        for job in report["jobs"]:
            twin = copy.deepcopy(job)
            twin["namespace"] = f"{job['namespace']}-{i}"
            jobs.append(twin)
    return {**report, "jobs": jobs}


def cells_laid_out(report: dict, monkeypatch) -> int:
    """How many cells and words the text report lays out: calls of textcols' per-cell functions."""
    calls = [0]
    for name in ("styled", "style", "wrap", "plain"):
        real = getattr(textcols, name)

        def counted(*args, _real=real, **kwargs):
            calls[0] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(textcols, name, counted)
    with contextlib.redirect_stdout(Writes()):
        print_report(report, explain=False, compare=False, all_actions=False)
    monkeypatch.undo()
    return calls[0]


@pytest.fixture(scope="module")
def report(many_jobs_log) -> dict:
    stream, source = open_input(str(many_jobs_log))
    with stream:
        return replay_inputs([(stream, source)]).report()


def test_the_text_reports_work_grows_with_its_rows_and_nothing_else(report, monkeypatch):
    rows = sum(len(j["actions"]) + len(j["history"]) for j in report["jobs"])
    assert len(report["jobs"]) == 30 and rows > 1000  # a report of some size
    two, three, four = (cells_laid_out(copies(report, k), monkeypatch) for k in (2, 3, 4))
    assert two > rows
    assert four - three == three - two  # 30 more jobs, the same work more: no cell is measured against others


def test_the_text_report_is_written_in_pieces(report):
    big = copies(report, 12)
    out = Writes()
    with contextlib.redirect_stdout(out):
        print_report(big, explain=False, compare=False, all_actions=False)
    lines = [piece.count("\n") for piece in out.pieces]
    longest_job = max(len(list(_one_job(job))) for job in big["jobs"])
    assert len(out.pieces) > 2 and max(lines) <= 4096 + longest_job + 2, lines  # never the whole report at once
    assert sum(lines) > 3 * 4096


def _one_job(job: dict):
    from vcbus.cli.timeline import job_lines

    return job_lines(job, explain=False, compare=False, all_actions=False, timeline=True, color=False, width=160)


def test_a_text_replay_lays_out_no_rich_table():
    """rich's Console and Table measure every cell of a table against every other: the text report uses neither."""
    code = ("import sys\nfrom vcbus.cli.main import main\ntry:\n    main(['replay', sys.argv[1]])\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in ('rich.console', 'rich.table', 'rich.live') if m in sys.modules), file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code, str(SEED)], cwd=ROOT, capture_output=True, timeout=120)
    assert b"Running -> Restarting" in res.stdout
    assert res.stderr.decode().strip().splitlines()[-1] == "[]", res.stderr.decode()


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
