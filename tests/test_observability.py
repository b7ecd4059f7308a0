"""Metrics, probes and logs: `/metrics`, `/healthz`, `/readyz`, `--log-format`, as an operator sees them.

The services run for real (a `vcbus up` subprocess on the test nats-server,
the HTTPS webhook in a thread); the probe server is queried over HTTP. The
counters are checked against what the bus holds, not against numbers written
down here.
"""

from __future__ import annotations

import io
import json
import logging
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from statemachines.admission import default_queues
from statemachines.engine import Engine
from statemachines.model.records import decode
from tests.fixtures_nats import ROOT, publish_file, stream_messages, vcbus_cli
from tests.test_webhook import JOB, answer, review, tls  # noqa: F401 - the module's TLS fixture
from vcbus.bus import subjects as s
from vcbus.errors import UserError
from vcbus.observability import logging as vlog
from vcbus.observability.probes import Readiness, parse_addr, serve
from vcbus.webhook.server import AdmissionServer

DEADLINE = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


# ------------------------------------------------------------------ logs


def test_json_logs_are_one_object_per_line_with_level_logger_extras_and_traceback():
    out = io.StringIO()
    vlog.configure(0, "json", stream=out)
    log = logging.getLogger("vcbus.test")
    log.debug("not shown at the default level")
    log.info("decided %d records", 3, extra={"seq": 7})
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("it failed")
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    assert [(d["level"], d["logger"], d["msg"]) for d in lines] == [
        ("INFO", "vcbus.test", "decided 3 records"), ("ERROR", "vcbus.test", "it failed")]
    assert lines[0]["seq"] == 7 and lines[0]["ts"].endswith("Z")
    assert "ValueError: boom" in lines[1]["exc"]


def test_text_logs_carry_time_level_and_logger_and_quiet_keeps_warnings_only():
    out = io.StringIO()
    vlog.configure(-1, "text", stream=out)
    logging.getLogger("vcbus.test").info("hidden")
    logging.getLogger("vcbus.test").warning("shown %s", "here")
    (line,) = out.getvalue().splitlines()
    stamp, level, rest = line.split(" ", 2)
    assert stamp.endswith("Z") and level == "WARNING" and rest == "vcbus.test: shown here"
    with pytest.raises(ValueError, match="xml"):
        vlog.configure(0, "xml")


# ------------------------------------------------------------------ probes


def test_metrics_addr_is_host_port_or_nothing():
    assert parse_addr("") is None
    assert parse_addr(":9464") == ("0.0.0.0", 9464)
    assert parse_addr("[::1]:80") == ("::1", 80)
    for bad in ("9464", "host:port", "h:70000"):
        with pytest.raises(UserError, match="--metrics-addr"):
            parse_addr(bad)


def test_probes_answer_ready_only_when_connected_caught_up_and_leader_or_standby():
    r = Readiness(max_lag=10)
    server = serve(f"127.0.0.1:{free_port()}", r)
    assert server is not None
    base = f"http://{server.address}"
    try:
        r.connected = True
        r.lag = {"decider": 10, "actuator": -1}  # the actuator's lag not measured yet: not ready
        status, body = get(base + "/readyz")
        assert status == 503 and "actuator: lag not known yet" in body
        r.lag["actuator"] = 0
        assert get(base + "/readyz") == (200, "ok (leader)\n")
        r.lag["decider"] = 11
        status, body = get(base + "/readyz")
        assert status == 503 and "decider is 11 messages behind (bound 10)" in body
        r.role = "standby"  # the leader's lag is not a standby's business
        assert get(base + "/readyz") == (200, "ok (standby)\n")
        r.connected = False
        assert get(base + "/readyz") == (503, "not connected to the bus\n")
        r.connected, r.role = True, "deposed"
        assert get(base + "/readyz")[0] == 503
        assert get(base + "/healthz") == (200, "ok\n")
        r.asynchronous, r.beat = True, time.monotonic() - 3600  # a loop that stopped turning
        status, body = get(base + "/healthz")
        assert status == 503 and "stalled" in body
        assert get(base + "/nope")[0] == 404
        status, text = get(base + "/metrics")
        assert status == 200 and "vcbus_leader" in text
    finally:
        server.stop()


def test_a_taken_port_is_an_error_when_asked_for_and_a_warning_on_the_default(caplog):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        addr = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(UserError, match=f"--metrics-addr {addr}: cannot listen"):
            serve(addr, Readiness())
        with caplog.at_level(logging.WARNING, logger="vcbus"):
            assert serve(addr, Readiness(), default=True) is None
        assert "metrics and probes off" in caplog.text


def test_bad_metrics_addr_is_a_one_line_error():
    res = vcbus_cli("up", "--nats", "nats://127.0.0.1:1", "--metrics-addr", "nowhere")
    assert res.returncode == 2
    assert res.stderr.decode().startswith("error: --metrics-addr 'nowhere': expected HOST:PORT")
    assert b"Traceback" not in res.stderr


def test_webhook_reviews_are_timed_and_counted_by_answer(tls):  # noqa: F811 - the fixture
    srv = AdmissionServer(("127.0.0.1", 0), cert_file=tls.cert_file, key_file=tls.key_file, queues=default_queues)
    srv.start_background()
    path = "/jobs/validate"

    def count(allowed: str) -> float:
        return REGISTRY.get_sample_value("vcbus_webhook_reviews_total", {"path": path, "allowed": allowed}) or 0.0

    timed = REGISTRY.get_sample_value("vcbus_webhook_request_seconds_count", {"path": path}) or 0.0
    before = count("true"), count("false")
    try:
        assert answer(srv, tls, path, review(JOB))["allowed"] is True
        bad = {**JOB, "spec": {**JOB["spec"], "queue": "no-such-queue"}}
        assert answer(srv, tls, path, review(bad))["allowed"] is False
    finally:
        srv.shutdown()
        srv.server_close()
    assert (count("true"), count("false")) == (before[0] + 1, before[1] + 1)
    assert REGISTRY.get_sample_value("vcbus_webhook_request_seconds_count", {"path": path}) == timed + 2


# ------------------------------------------------------------------ vcbus up, for real


@pytest.mark.nats
async def test_up_serves_metrics_that_match_the_bus_and_logs_json(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vcbus.cli.main", "up", "--nats", bus_settings.nats_url, "--metrics-addr",
         f"127.0.0.1:{port}", "--log-format", "json", "--max-lag", "0"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + DEADLINE
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                status, _ = get(base + "/readyz")
                metrics = samples(get(base + "/metrics")[1])
            except OSError:
                status, metrics = 0, {}
            decided = metrics.get(("vcbus_records_decided_total", ()), 0)
            if status == 200 and decided == 64:  # ready with --max-lag 0: nothing left to decide
                break
            assert time.monotonic() < deadline, f"not ready and caught up: {status}, {decided} decided"
            time.sleep(0.2)
        assert metrics[("vcbus_bus_connected", ())] == 1 and metrics[("vcbus_leader", ())] == 1
        assert metrics[("vcbus_bus_consumer_pending", (("consumer", "decider"), ("stream", s.K8S_STREAM)))] == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    stored = await stream_messages(bus_settings, s.JOBS_STREAM) + await stream_messages(bus_settings, s.CMDS_STREAM)
    decisions = {k: v for k, v in metrics.items() if k[0] == "vcbus_decisions_total"}
    assert sum(decisions.values()) == len(stored) > 0
    commands = sum(v for k, v in decisions.items() if ("kind", "command") in k[1])
    assert commands == len(await stream_messages(bus_settings, s.CMDS_STREAM))
    lines = [json.loads(line) for line in err.splitlines()]
    assert {d["level"] for d in lines} <= {"DEBUG", "INFO", "WARNING", "ERROR"}
    assert any(d["logger"] == "vcbus.decider" and "deciding from seq" in d["msg"] for d in lines)
    # a queue's PodGroups by phase, under Volcano's metric names (its queue controller no longer writes them
    # into the Queue, nor does vcbus's): what a fold of the whole log counts
    engine = Engine()
    for seq, _, _, body in await stream_messages(bus_settings, s.K8S_STREAM):
        engine.apply(seq, decode(body))
    want = engine.queue_controller.podgroup_counts()
    assert list(want) == ["default"]  # (all 0 at the end: the seed job's PodGroup is gone)
    have = {q: {phase: metrics[(f"volcano_queue_pod_group_{phase.lower()}_count", (("queue_name", q),))]
                for phase in by_phase} for q, by_phase in want.items()}
    assert have == want


def test_every_metric_is_listed_in_the_operations_guide():
    from types import SimpleNamespace

    from vcbus.bus.decider import DeciderStats
    from vcbus.bus.scheduling import SchedulerStats
    from vcbus.observability.metrics import ServiceStats

    stats = ServiceStats()  # the scrape-time metrics appear once services are attached
    stats.watch(decider=SimpleNamespace(stats=DeciderStats(), applied=0),
                scheduler=SimpleNamespace(stats=SchedulerStats(), unevaluated=dict), projector=SimpleNamespace(written=0),
                queues=SimpleNamespace(engine=Engine()))
    names = {f.name for f in REGISTRY.collect() if f.name.startswith("vcbus_")}
    names |= {f.name for f in stats.collect()}
    guide = (ROOT / "docs" / "operations.md").read_text()
    documented = {n for n in names if f"`{n}`" in guide or f"`{n}_total`" in guide}
    assert names - documented == set()
    assert len(names) >= 20


def wait_for(what: str, condition, proc: subprocess.Popen):
    deadline = time.monotonic() + DEADLINE
    while True:
        assert proc.poll() is None, f"exited with {proc.returncode} while waiting for {what}"
        try:
            value = condition()
        except OSError:
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {DEADLINE}s: {what}"
        time.sleep(0.2)


@pytest.mark.nats
async def test_the_scheduler_times_its_sessions_and_the_global_log_format_applies(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vcbus.cli.main", "--log-format", "json", "scheduler", "--nats", bus_settings.nats_url,
         "--metrics-addr", f"127.0.0.1:{port}"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )
    try:
        def sessions():
            metrics = samples(get(base + "/metrics")[1])
            n = metrics.get(("vcbus_scheduler_sessions_total", ()), 0)
            return metrics if n >= 1 and get(base + "/readyz")[0] == 200 else None

        metrics = wait_for("a scheduling session, and ready", sessions, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    timed = metrics[("vcbus_scheduler_session_seconds_count", ())]
    ran = metrics[("vcbus_scheduler_sessions_total", ())] + metrics[("vcbus_scheduler_failed_sessions_total", ())]
    assert timed >= ran >= 1  # a session is timed before it is stored
    lines = [json.loads(line) for line in err.splitlines()]
    assert any(d["logger"] == "vcbus" and d["msg"].startswith("vcbus scheduler:") for d in lines)


def test_the_webhook_serves_probes_and_metrics_beside_https(tls, tmp_path):  # noqa: F811 - the fixture
    port, https = free_port(), free_port()
    queues = tmp_path / "q.yaml"
    queues.write_text("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: default}\n"
                      "status: {state: Open}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vcbus.cli.main", "webhook", "--tls-cert", tls.cert_file, "--tls-key", tls.key_file,
         "--host", "127.0.0.1", "--port", str(https), "--queues", str(queues), "--metrics-addr", f"127.0.0.1:{port}",
         "--log-format", "json"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert wait_for("/readyz", lambda: get(f"http://127.0.0.1:{port}/readyz") == (200, "ok\n"), proc)
        status, text = get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and "# TYPE vcbus_webhook_request_seconds histogram" in text
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert any(json.loads(line)["msg"].startswith("vcbus webhook listening on https://127.0.0.1:")
               for line in err.splitlines())
