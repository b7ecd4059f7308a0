"""Leader election on a `coordination.k8s.io/v1` Lease, and the fence every cluster write passes.

Several `vcbus up --leader-elect` replicas share one bus and one cluster; only
the holder of the Lease runs the services (bridge, decider, projector,
scheduler, actuator), the others wait as standbys. The rules are client-go's
(`k8s.io/client-go/tools/leaderelection`), rewritten for asyncio:

- **acquire**: create the Lease, or take it over when its holder is empty
  (released on a clean stop) or has not renewed it for `lease_duration` as
  timed on *this* replica's monotonic clock since it last saw the record
  change (no trust in other clocks). Every write is a compare-and-swap on the
  Lease's resourceVersion: of two contenders one wins, the other gets 409.
- **renew** every `retry_period`; a leader that has not renewed within
  `renew_deadline` (< `lease_duration`) has lost: `keep()` returns and
  `vcbus up` stops everything and exits non-zero (its pod restarts as a
  standby).
- **fence** (`check()`): the actuator calls it in its worker thread before
  every command. It refuses (`NotLeader`) once the last successful renew is
  older than `renew_deadline`, which is before any standby may take over
  (`lease_duration` after the last renew it saw). A deposed leader's late
  command is therefore never applied. The writes carry the leader's identity
  in their User-Agent (`vcbus-<identity>/leader`), which the API server keeps
  as the field manager in `managedFields` (and in the audit log). What still
  slips through (a write already on the wire) is harmless: every command is
  idempotent (vcbus.k8s.actuator).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import socket
import time
import uuid
from kubernetes import client
from kubernetes.client.rest import ApiException

from vcbus.observability import metrics as m

log = logging.getLogger("vcbus.leader")

DEFAULT_LEASE = "vcbus-controller"


class NotLeader(RuntimeError):
    """This replica does not hold the Lease (any more): it must not write to the cluster."""


def default_identity() -> str:
    """The pod name (HOSTNAME in a pod) or host name, plus a random suffix: unique per process."""
    host = os.environ.get("HOSTNAME") or socket.gethostname()
    return f"{host}_{uuid.uuid4().hex[:8]}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class LeaderElector:
    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        namespace: str,
        name: str = DEFAULT_LEASE,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float | None = None,
        retry_period: float | None = None,
    ) -> None:
        self.api = client.CoordinationV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline if renew_deadline is not None else lease_duration * 2 / 3
        self.retry_period = retry_period if retry_period is not None else max(0.2, lease_duration / 7)
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("leader election needs retry period < renew deadline < lease duration")
        self.timeout = max(1.0, self.renew_deadline / 2)  # per Lease call: a hung call must not outlive the deadline
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0  # monotonic time it was first seen
        self._renewed_at: float | None = None  # monotonic time of our last successful acquire/renew
        # The API server names a write's field manager after the User-Agent up to its first "/".
        api_client.user_agent = f"vcbus-{self.identity}/leader"

    # ------------------------------------------------------------------ the fence

    def holds(self) -> bool:
        return self._renewed_at is not None and time.monotonic() - self._renewed_at < self.renew_deadline

    def check(self) -> None:
        """Raise `NotLeader` unless this replica renewed the Lease within the renew deadline."""
        if not self.holds():
            raise NotLeader(f"{self.identity} does not hold the Lease {self.namespace}/{self.name}")

    # ------------------------------------------------------------------ one attempt (blocking)

    def try_acquire_or_renew(self) -> bool:
        """One compare-and-swap on the Lease; True if this replica holds it afterwards."""
        now = _now()
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout)
        except ApiException as err:
            if err.status != 404:
                raise
            return self._create(now)
        spec = lease.spec or client.V1LeaseSpec()
        holder = spec.holder_identity or ""
        record = (holder, str(spec.renew_time))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        duration = float(spec.lease_duration_seconds or self.lease_duration)
        mine = holder == self.identity
        if holder and not mine and time.monotonic() - self._observed_at < duration:
            return False  # someone else holds it and renewed it recently enough
        if not mine:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity = self.identity
        spec.lease_duration_seconds = max(1, int(round(self.lease_duration)))
        spec.renew_time = now
        lease.spec = spec
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=self.timeout)  # carries resourceVersion: CAS
        except ApiException as err:
            if err.status == 409:
                return False  # another replica wrote it first
            raise
        self._won(now, taken_over=not mine)
        return True

    def _create(self, now: dt.datetime) -> bool:
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=client.V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=max(1, int(round(self.lease_duration))),
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            self.api.create_namespaced_lease(self.namespace, body, _request_timeout=self.timeout)
        except ApiException as err:
            if err.status == 409:
                return False
            raise
        self._won(now, taken_over=True)
        return True

    def _won(self, now: dt.datetime, *, taken_over: bool) -> None:
        self._renewed_at = time.monotonic()
        self._observed, self._observed_at = (self.identity, str(now)), self._renewed_at
        if taken_over:
            m.LEADER_TRANSITIONS.inc()
            log.info("leader: %s acquired the Lease %s/%s", self.identity, self.namespace, self.name)
        m.LEADER.set(1)

    def release(self) -> None:
        """Give the Lease up on a clean stop, so a standby takes over at once (client-go's ReleaseOnCancel)."""
        if self._renewed_at is None:
            return
        self._renewed_at = None
        m.LEADER.set(0)
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace, _request_timeout=self.timeout)
            if (lease.spec.holder_identity or "") != self.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.lease_duration_seconds = 1
            lease.spec.renew_time = _now()
            self.api.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=self.timeout)
            log.info("leader: %s released the Lease", self.identity)
        except Exception as err:  # the API server may be away: the Lease then expires by itself
            log.warning("leader: releasing the Lease failed (%s); a standby takes over after it expires", err)

    # ------------------------------------------------------------------ loops (asyncio)

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait as a standby until this replica holds the Lease (True) or `stop` is set (False)."""
        log.info("leader: %s is a standby for the Lease %s/%s", self.identity, self.namespace, self.name)
        while not stop.is_set():
            try:
                if await asyncio.to_thread(self.try_acquire_or_renew):
                    return True
            except Exception as err:  # ApiException, urllib3's connection errors, timeouts
                if getattr(err, "status", None) in (401, 403):
                    raise
                log.warning("leader: taking the Lease failed (%s); next try in %.1fs", err, self.retry_period)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.retry_period)
        return False

    async def keep(self, stop: asyncio.Event) -> bool:
        """Renew until `stop` (True: still leader) or until the renew deadline passes (False: lost)."""
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.retry_period)
            if stop.is_set():
                break
            try:
                ok = await asyncio.to_thread(self.try_acquire_or_renew)
            except Exception as err:  # API server away: keep trying until the deadline
                log.warning("leader: renewing the Lease failed (%s)", err)
                ok = False
            if not ok and not self.holds():
                m.LEADER.set(0)
                m.LEADER_TRANSITIONS.inc()
                log.error("leader: %s lost the Lease %s/%s (not renewed within %.1fs)",
                          self.identity, self.namespace, self.name, self.renew_deadline)
                self._renewed_at = None
                return False
        return True


def lease_namespace(explicit: str | None) -> str:
    """--lease-namespace, else the pod's own namespace (service account), else `default`."""
    if explicit:
        return explicit
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    with contextlib.suppress(OSError):
        with open(path) as f:
            return f.read().strip() or "default"
    return "default"


__all__ = ["LeaderElector", "NotLeader", "DEFAULT_LEASE", "lease_namespace", "default_identity"]
