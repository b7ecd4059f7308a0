"""One input, one answer: the same records give the same report however they are given.

Real `vcbus` processes read real files, real pipes (a `cat` process into
`vcbus replay -`), a redirect, several files, and the bus path (`vcbus demo`,
its own embedded server). The input is the seed log as one kubectl watch per
kind prints it, concatenated (out of resourceVersion order across kinds).
A recording that starts mid-job (`vcbus record`'s initial list, marked by the
initial-events-end bookmark) is folded whole before the first decision.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.test_replay_cli import ROOT, SEED, records, vcbus
from tests.test_replay_forms import KIND_ORDER, per_kind, pretty
from tests.test_replay_live import Output, interruptible

DEADLINE = 120.0
BEFORE = {"type": "BOOKMARK", "object": {"metadata": {"annotations": {"vcbus.volcano.sh/record-format": "2"}}}}
AFTER = {"type": "BOOKMARK", "object": {"metadata": {"annotations": {"k8s.io/initial-events-end": "true"}}}}


def concatenated(tmp_path):
    kinds = per_kind(records(SEED))
    log = tmp_path / "all.log"
    log.write_text("".join(pretty(kinds[k]) for k in KIND_ORDER))
    return log, kinds


def piped(log, *args: str) -> subprocess.CompletedProcess:
    """`cat LOG | vcbus replay ARGS -`: a real pipe, not a file, on the replay's stdin."""
    cat = subprocess.Popen(["cat", str(log)], stdout=subprocess.PIPE)
    try:
        return subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", *args, "-"], stdin=cat.stdout,
                              capture_output=True, cwd=ROOT, timeout=DEADLINE)
    finally:
        cat.stdout.close()
        cat.wait(timeout=DEADLINE)


@pytest.mark.slow
def test_per_kind_watches_piped_redirected_or_together_give_the_files_report(tmp_path):
    log, kinds = concatenated(tmp_path)
    by_file = vcbus("replay", str(log))
    assert by_file.returncode == 0, by_file.stderr.decode()
    assert "Completed" in by_file.stdout.decode().split("final status", 1)[1]
    assert "DIVERGENCE" not in by_file.stdout.decode()
    # a live pipe: the rows it printed before it saw the order are followed by the merged report
    pipe = piped(log)
    assert pipe.returncode == 0, pipe.stderr.decode()
    assert pipe.stdout.endswith(by_file.stdout), pipe.stdout.decode()[-3000:]
    err = pipe.stderr.decode()
    assert "out of resourceVersion order" in err and "merged" in err
    # a redirect is a file: the same bytes
    with open(log, "rb") as fh:
        redirect = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", "-"], stdin=fh,
                                  capture_output=True, cwd=ROOT, timeout=DEADLINE)
    assert redirect.returncode == 0 and redirect.stdout == by_file.stdout
    # the files given together
    files = []
    for kind in KIND_ORDER:
        f = tmp_path / f"{kind.lower()}s.log"
        f.write_text(pretty(kinds[kind]))
        files.append(str(f))
    together = vcbus("replay", *files)
    assert together.returncode == 0 and together.stdout == by_file.stdout
    # --json: file, pipe, files together
    as_json = vcbus("replay", "--json", str(log)).stdout
    assert piped(log, "--json").stdout == as_json == vcbus("replay", "--json", *files).stdout


def test_follow_cannot_reorder_says_so_and_exits_non_zero(tmp_path):
    log, _ = concatenated(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "vcbus.cli.main", "replay", "--follow", str(log)], cwd=ROOT,
                            preexec_fn=interruptible, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = Output(proc.stderr)
    try:
        err.wait_for(lambda line: "out of resourceVersion order" in line, "the order warning")
        proc.send_signal(signal.SIGINT)
        rest = err.rest()
        assert proc.wait(timeout=DEADLINE) == 2
    finally:
        proc.kill()
    last = rest.strip().splitlines()[-1]
    assert last.startswith("error: ") and f"vcbus replay {log}" in last, rest
    assert "Traceback" not in rest


def test_a_watch_error_warns_that_the_log_has_a_gap(tmp_path):
    recs = records(SEED)
    gone = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": "too old resource version: 1012 (1020)", "reason": "Expired",
                                        "code": 410}}
    log = tmp_path / "gap.log"
    log.write_text("".join(json.dumps(r) + "\n" for r in [*recs[:20], gone, *recs[20:]]))
    res = vcbus("replay", "--json", str(log))
    assert res.returncode == 0, res.stderr.decode()
    err = res.stderr.decode()
    assert f"{log}: record 21: a watch ERROR (410 Expired: too old resource version: 1012 (1020))" in err, err
    assert "gap" in err


def test_until_refuses_a_time_that_does_not_parse():
    for text in ("2026-13-45T99:00:00Z", "2026-11-30T25:00:00Z", "yesterday"):
        res = vcbus("replay", str(SEED), "--until", text)
        assert res.returncode == 2, text
        err = res.stderr.decode()
        assert err.startswith(f"error: --until {text!r}:") and err.count("\n") == 1, err
    assert vcbus("replay", str(SEED), "--until", "2026-11-30T09:05:00+01:00").returncode == 0


def test_until_zero_is_refused_and_a_stop_outside_the_log_says_so():
    """Records are numbered from 1: `--until 0` would replay nothing, and is a mistake for 1 or for a time. A time
    before the log's first record replays nothing too, rightly (the state then): said on stderr, not silent."""
    res = vcbus("replay", str(SEED), "--until", "0")
    err = res.stderr.decode()
    assert res.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("error: --until 0: records are numbered from 1") and "--until 1" in err, err
    first = records(SEED)[0]["object"]["metadata"]["creationTimestamp"]
    res = vcbus("replay", "--json", str(SEED), "--until", "2026-11-30T07:00:00Z")
    assert res.returncode == 0 and json.loads(res.stdout)["jobs"] == []
    warning = res.stderr.decode()
    assert warning.startswith("warning: --until 2026-11-30T07:00:00Z is before the log's first record") and \
        f"record 1, at {first}" in warning and "nothing is replayed" in warning, warning
    assert vcbus("replay", str(SEED), "--until", "1").stderr == b""  # one record replayed: nothing to say
    # past the log's end: all of it, and said so; up to its last record exactly: nothing to say
    n = len(records(SEED))
    past = vcbus("replay", "--json", str(SEED), "--until", str(n + 100))
    assert past.returncode == 0 and json.loads(past.stdout) == json.loads(vcbus("replay", "--json", str(SEED)).stdout)
    assert past.stderr.decode() == f"warning: --until {n + 100}: the log ends at record {n}: all of it is replayed\n"
    assert vcbus("replay", str(SEED), "--until", str(n)).stderr == b""


def mid_job(cut: int) -> list[dict]:
    """What `vcbus record` started after the seed log's record `cut` writes: the objects then, ADDED in
    resourceVersion order between the two marks of the initial list, then the rest of the log."""
    recs = records(SEED)
    live: dict[str, dict] = {}
    for r in recs[:cut]:
        uid = r["object"]["metadata"]["uid"]
        if r["type"] == "DELETED":
            live.pop(uid, None)
        else:
            live[uid] = r["object"]
    listed = sorted(live.values(), key=lambda o: int(o["metadata"]["resourceVersion"]))
    after = json.loads(json.dumps(AFTER))
    after["object"]["metadata"]["resourceVersion"] = recs[cut - 1]["object"]["metadata"]["resourceVersion"]
    return [BEFORE, *({"type": "ADDED", "object": o} for o in listed), after, *recs[cut:]]


def test_a_recording_started_mid_job_folds_its_initial_list_whole(tmp_path):
    recs = mid_job(40)  # the restarted job is Pending again, its new pods listed after the job
    kinds = [r["object"].get("kind") for r in recs[:7]]
    assert kinds.index("Job") < max(i for i, k in enumerate(kinds) if k == "Pod")  # the case of the issue
    log = tmp_path / "mid.log"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = vcbus("replay", "--json", str(log))
    assert res.returncode == 0, res.stderr.decode()
    (job,) = json.loads(res.stdout)["jobs"]
    assert not [c for c in job["commands"] if c["command"] == "CreatePod"]  # the pods exist
    assert job["status"]["state"]["phase"] == "Completed" and not job["divergences"]
    # without the marker, the same records are taken in their order (as before)
    plain = tmp_path / "plain.log"
    plain.write_text("".join(json.dumps(r) + "\n" for r in recs if r["type"] != "BOOKMARK"))
    (old,) = json.loads(vcbus("replay", "--json", str(plain)).stdout)["jobs"]
    assert [c for c in old["commands"] if c["command"] == "CreatePod"]
    # the live path (a pipe) and the text output say the same
    text = vcbus("replay", str(log)).stdout
    assert piped(log).stdout.decode().split("final status", 1)[1] == text.decode().split("final status", 1)[1]
    assert b"create pods" not in text
