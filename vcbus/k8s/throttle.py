"""Client-side rate limiting of API requests: client-go's token bucket (`--kube-api-qps`, `--kube-api-burst`).

Every Kubernetes client in client-go carries a token-bucket limiter (`rest.Config`
QPS and Burst; `k8s.io/client-go/util/flowcontrol`): up to `burst` requests go
at once, then `qps` per second on average. Volcano's components set theirs with
`--kube-api-qps` / `--kube-api-burst` (`cmd/controller-manager/app/options`:
50/100; `cmd/scheduler/app/options`: 2000/2000). vcbus's cluster side takes the
same flags; a request waits for its token in the thread that sends it (the
actuator's workers, the bridge's lists), never holding a lock while it sleeps.
A qps of 0 turns the limit off.
"""

from __future__ import annotations

import threading
import time
from typing import Callable


class Throttle:
    """A token bucket shared by the threads of one client: `wait()` before each request."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if qps < 0:
            raise ValueError(f"qps must be 0 (no limit) or positive, not {qps}")
        if qps and burst < 1:
            raise ValueError(f"burst must be at least 1, not {burst}")
        self.qps = float(qps)
        self.burst = int(burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._at = clock()
        self._lock = threading.Lock()
        self.waited = 0.0  # seconds requests spent waiting for a token, in all

    def wait(self) -> float:
        """Take a token, sleeping until one is due; the seconds slept."""
        if not self.qps:
            return 0.0
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0  # taken now, or reserved: the ones behind wait longer
            delay = -self._tokens / self.qps if self._tokens < 0 else 0.0
            self.waited += delay
        if delay:
            self._sleep(delay)
        return delay
