"""`vcbus replay`'s progress line on a terminal's stderr (issue 29; vcbus/cli/progress.py).

The replay reads a named pipe that the test fills in two halves, so the replay is long for as long as
the test wants (no timing guess): the line must appear while the second half has not been written,
say the record reached, be cleared before a warning and before the report, and never appear when
stderr is not a terminal. Real processes, a real pty, a real FIFO.
"""

from __future__ import annotations

import json
import os
import pathlib
import pty
import re
import subprocess
import sys

from tests.ptyio import read_to_end, read_until
from vcbus.cli.progress import CLEAR, ReplayProgress

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOG = ROOT / "examples" / "retries-exhausted.jsonl"
GAP = json.dumps({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                              "message": "too old resource version: 1 (40)", "reason": "Expired",
                                              "code": 410}}) + "\n"


def start(fifo: pathlib.Path, stdout: pathlib.Path, stderr) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "vcbus.cli.main", "replay", str(fifo)], cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=stdout.open("wb"), stderr=stderr)


def halves(extra: str = "") -> tuple[bytes, bytes]:
    lines = LOG.read_text().splitlines(keepends=True)
    return "".join(lines[:40]).encode(), (extra + "".join(lines[40:])).encode()


def test_a_long_replay_shows_its_progress_on_a_terminal_and_clears_it(tmp_path):
    fifo, out = tmp_path / "watch.fifo", tmp_path / "report.txt"
    os.mkfifo(fifo)
    main, child = pty.openpty()
    proc = start(fifo, out, child)
    os.close(child)
    got = bytearray()
    try:
        first, rest = halves(GAP)
        with fifo.open("wb") as pipe:
            pipe.write(first)
            pipe.flush()
            line = read_until(main, rb"replaying [^\r]*: record [0-9,]+, [0-9]+s", got)
            assert str(fifo).encode() in line
            assert 0 < int(re.search(rb"record ([0-9,]+)", line).group(1).replace(b",", b"")) <= 40
            pipe.write(rest)
        read_to_end(main, got)
    finally:
        os.close(main)
    assert proc.wait(timeout=120) == 0
    text = bytes(got)
    # the watch ERROR's warning starts on a cleared line, not after the progress text
    assert re.search(rb"\r\x1b\[Kwarning: [^\n]*410", text), text
    last = text.rfind(b"replaying ")
    assert CLEAR.encode() in text[last:], text[last:]  # the last line drawn is cleared
    same = tmp_path / "same.jsonl"
    same.write_bytes(first + rest)
    plain = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", str(same)], cwd=ROOT,
                           capture_output=True, timeout=120)
    assert out.read_bytes() == plain.stdout  # the report itself is the same as without a terminal


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path):
    fifo, out = tmp_path / "watch.fifo", tmp_path / "report.txt"
    os.mkfifo(fifo)
    proc = start(fifo, out, subprocess.PIPE)
    first, rest = halves()
    with fifo.open("wb") as pipe:
        pipe.write(first)
        pipe.write(rest)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert b"replaying" not in err and b"\x1b[" not in err


def test_the_line_measures_a_file_read_so_far(tmp_path):
    log = tmp_path / "watch.jsonl"
    log.write_bytes(b"x" * 3_000_000)

    with log.open("rb", buffering=0) as stream, open(os.devnull, "w") as null:
        stream.read(1_500_000)
        progress = ReplayProgress([(stream, str(log))], out=null)  # not started: line() is what it would draw
        progress.on_record(1234, [])
        assert progress.line().startswith(f"replaying {log}: record 1,234, 1.5 of 3.0 MB read (50%), ")
        assert ReplayProgress.on_terminal([(stream, str(log))], out=null) is None  # /dev/null is no terminal
