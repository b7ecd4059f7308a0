"""Following a live log: `vcbus replay -` and `--follow FILE` print each row as its record arrives.

A real `vcbus replay` process reads a pipe (or a file being appended to); the
test writes the seed log's records one at a time and, for every record that
makes a timeline row (a phase change, a decisive action), waits until that row
is on the process's stdout before it writes the next record. Ctrl-C (SIGINT)
prints the final statuses so far and exits 130.
"""

from __future__ import annotations

import json
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import time

from tests.test_replay_cli import SEED, records, replay_json

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEADLINE = 60.0  # generous: the machine is shared


def interruptible() -> None:
    """preexec_fn for children these tests stop with SIGINT, as Ctrl-C would.

    A shell without job control starts background commands with SIGINT ignored, and
    children inherit that (so `make test &` in a script would make Ctrl-C a no-op for
    every child and these tests would wait forever). Restore the default disposition
    so Python installs its KeyboardInterrupt handler, as in a terminal.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Output:
    """A child's stdout, line by line, read by a thread so the test can wait for a line with a deadline."""

    def __init__(self, stream) -> None:
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.put(line.decode())
        self.lines.put(None)

    def wait_for(self, predicate, what: str) -> str:
        for line in self.seen:
            if predicate(line):
                self.seen.remove(line)
                return line
        end = time.monotonic() + DEADLINE
        while True:
            left = end - time.monotonic()
            assert left > 0, f"no line with {what} within {DEADLINE}s; got so far:\n{''.join(self.seen)}"
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"output ended without {what}; got:\n{''.join(self.seen)}"
            if predicate(line):
                return line
            self.seen.append(line)

    def rest(self) -> str:
        out = []
        while True:
            line = self.lines.get(timeout=DEADLINE)
            if line is None:
                return "".join(self.seen + out)
            out.append(line)


def expected_rows() -> dict[int, list[str]]:
    """seq -> texts of the rows that record must print (phase changes and decisive actions)."""
    (job,) = replay_json(str(SEED))["jobs"]
    rows: dict[int, list[str]] = {}
    for h in job["history"]:
        rows.setdefault(h["seq"], []).append(f"{h['from'] or chr(34) * 2} -> {h['to']}")
    for a in job["actions"]:
        if a["action"] != "SyncJob":
            rows.setdefault(a["seq"], []).append(f"-> {a['action']}")
    return rows


def row_of(seq: int, text: str):
    return lambda line: line.split()[:1] == [str(seq)] and text in line


def replay_process(*args: str, stdin=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "vcbus.cli.main", "replay", *args], cwd=ROOT,
                            preexec_fn=interruptible,
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_each_row_is_printed_before_the_next_record_is_written():
    recs = records(SEED)
    rows = expected_rows()
    assert len(rows) >= 6
    proc = replay_process("-", stdin=subprocess.PIPE)
    out = Output(proc.stdout)
    try:
        for seq, rec in enumerate(recs, 1):
            proc.stdin.write(json.dumps(rec).encode() + b"\n")
            proc.stdin.flush()
            for text in rows.get(seq, []):
                out.wait_for(row_of(seq, text), f"record {seq}'s row {text!r}")
        proc.stdin.close()
        tail = out.rest()
        assert proc.wait(timeout=DEADLINE) == 0, proc.stderr.read().decode()
    finally:
        proc.kill()
    assert f"{len(recs)} records read" in tail and "final status" in tail and "Completed" in tail


def test_ctrl_c_prints_the_report_so_far_and_exits_130():
    recs = records(SEED)
    rows = expected_rows()
    restart = next(seq for seq, texts in rows.items() if "Running -> Restarting" in texts)
    proc = replay_process("-", stdin=subprocess.PIPE)
    out = Output(proc.stdout)
    try:
        proc.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in recs[:restart]))
        proc.stdin.flush()
        out.wait_for(row_of(restart, "Running -> Restarting"), "the restart")
        proc.send_signal(signal.SIGINT)  # the pipe stays open: only Ctrl-C ends it
        tail = out.rest()
        assert proc.wait(timeout=DEADLINE) == 130
    finally:
        proc.kill()
    assert f"{restart} records read" in tail and "interrupted" in tail
    assert "final status" in tail and "Restarting" in tail.split("final status", 1)[1]
    assert b"Traceback" not in proc.stderr.read()


def test_follow_reads_a_file_as_it_grows_like_tail_f(tmp_path):
    recs = records(SEED)
    rows = expected_rows()
    log = tmp_path / "watch.log"
    first = min(rows)
    with open(log, "wb") as fh:
        fh.write(b"".join(json.dumps(r).encode() + b"\n" for r in recs[:first]))
    proc = replay_process("--follow", str(log))
    out = Output(proc.stdout)
    try:
        out.wait_for(row_of(first, rows[first][0]), "the first row")
        with open(log, "ab") as fh:
            for seq in range(first + 1, len(recs) + 1):
                data = json.dumps(recs[seq - 1]).encode() + b"\n"
                half = len(data) // 2  # a record is written in two parts: never read half-way
                fh.write(data[:half])
                fh.flush()
                os.fsync(fh.fileno())
                fh.write(data[half:])
                fh.flush()
                for text in rows.get(seq, []):
                    out.wait_for(row_of(seq, text), f"record {seq}'s row {text!r}")
        proc.send_signal(signal.SIGINT)
        tail = out.rest()
        assert proc.wait(timeout=DEADLINE) == 130
    finally:
        proc.kill()
    assert "interrupted" in tail and "Completed" in tail.split("final status", 1)[1]
    assert b"invalid" not in proc.stderr.read()
