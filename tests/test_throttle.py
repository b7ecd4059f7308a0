"""Client-side rate limiting (vcbus.k8s.throttle): client-go's token bucket, and the flags that set it."""

from __future__ import annotations

import pytest

from vcbus.k8s.throttle import Throttle


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_burst_goes_at_once_then_requests_are_spaced_by_one_over_qps():
    clock = Clock()
    throttle = Throttle(10, 3, clock=clock, sleep=clock.sleep)
    assert [throttle.wait() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert throttle.wait() == pytest.approx(0.1)
    assert throttle.wait() == pytest.approx(0.1)
    clock.now += 10  # idle: the bucket fills up to the burst, not more
    assert [throttle.wait() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert throttle.wait() == pytest.approx(0.1)
    assert throttle.waited == pytest.approx(0.3)


def test_waiters_reserve_their_tokens_so_the_ones_behind_wait_longer():
    clock = Clock()
    throttle = Throttle(100, 1, clock=clock, sleep=lambda s: None)  # nobody sleeps: all ask at the same instant
    assert [round(throttle.wait(), 3) for _ in range(4)] == [0.0, 0.01, 0.02, 0.03]


def test_qps_zero_is_no_limit_and_bad_values_are_refused():
    assert all(Throttle(0, 0).wait() == 0.0 for _ in range(1000))
    with pytest.raises(ValueError, match="qps"):
        Throttle(-1, 10)
    with pytest.raises(ValueError, match="burst"):
        Throttle(5, 0)


@pytest.mark.parametrize(("flags", "message"), [
    (["--kube-api-qps", "-1"], "--kube-api-qps -1: expected 0 (no limit) or more"),
    (["--kube-api-burst", "0"], "--kube-api-burst 0: expected 1 or more"),
    (["--actuator-concurrency", "0"], "--actuator-concurrency 0: expected 1..1024"),
    (["--kube-api-timeout", "soon"], "--kube-api-timeout 'soon': expected a duration"),
])
def test_up_refuses_bad_client_flags_before_it_starts(tmp_path, flags, message):
    from tests.fixtures_nats import vcbus_cli

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    res = vcbus_cli("up", "--kubeconfig", str(kubeconfig), "--data-dir", str(tmp_path / "d"), *flags)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert message in err and "Traceback" not in err
