"""Recording a watch log: every kind vcbus reads, listed then watched, merged in etcd's order.

kubectl watches one resource type at a time, and per-kind logs replayed one
after the other give wrong results. `Recorder` writes one log in the format
`vcbus replay` reads (`{"type", "object"}` JSON lines, objects as kubectl
prints them, but managedFields reduced to who wrote and when: the field sets
go, the times stay for the replay's clock), in resourceVersion order, the
order etcd wrote the changes in (all kinds share its revision counter):

1. **One snapshot.** The first kind is listed at the latest revision R, every
   other kind *at* R (`resourceVersionMatch=Exact`), so all lists show the
   cluster at the same instant (if the server cannot, at its latest revision,
   with a warning). Their objects are written as ADDED, sorted by
   resourceVersion, between two BOOKMARKs that mark the list
   (`vcbus.logmarks.initial_list_marks`: the format's version before, the API
   server's own end-of-initial-events mark after), so a replay folds the list
   whole before it decides. Errors here (no cluster, 403, a kind the server does not
   serve) raise `UserError` with exit code 4 (the cluster is unavailable): nothing is written.
2. **The watches** (`vcbus.k8s.watching.ResourceWatcher`, one thread each, all
   from R: reconnects, bookmarks and relists on 410 Gone are its business)
   feed one queue. A record is written once it is the lowest resourceVersion
   waiting and has waited `window` seconds, so events of different kinds that
   arrive slightly out of order are put back in order. A DELETED synthesised
   by a relist carries the object's last known resourceVersion (older than
   what was written since); it is stamped with the highest one seen so far,
   as the API server stamps a deletion with its revision.

Each record is flushed as it is written. `run` returns when `stop` is set or the
deadline passes, after writing everything received (nothing is lost on Ctrl-C).

Scope: one namespace or all; a label selector (every kind, as `kubectl -l`);
or one job: its vcjob (by name), its pods (label `volcano.sh/job-name`), its
podgroup (owned by the vcjob) and the Commands that target it.
"""

from __future__ import annotations

import heapq
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import msgspec
import urllib3

from vcbus import exitcodes
from vcbus.errors import UserError
from vcbus.cronjobs.zonedata import cronjob_zones
from vcbus.logmarks import initial_list_marks
from vcbus.k8s.ownership import job_owners
from vcbus.k8s.redaction import redact_job
from vcbus.k8s.watching import JOB_NAME_LABEL, KubeApiError, ResourceKind, ResourceWatcher, api_request, normalize
from vcbus.k8s.watching import resource_kind as _resource_kind

log = logging.getLogger("vcbus.record")

DEFAULT_KINDS = ("vcjobs", "pods", "podgroups", "queues", "commands", "nodes")
JOB_KINDS = ("vcjobs", "pods", "podgroups", "commands")
_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True)
class Scope:
    namespace: str | None = None  # None: all namespaces
    selector: str | None = None  # a label selector for every kind
    job: str | None = None  # "<ns>/<name>": only this job's objects

    def query(self, rk: ResourceKind) -> dict[str, str | None]:
        labels = [self.selector] if self.selector else []
        fields = None
        if self.job is not None:
            name = self.job.split("/", 1)[1]
            if rk.name == "vcjobs":
                fields = f"metadata.name={name}"
            elif rk.name == "pods":
                labels.append(f"{JOB_NAME_LABEL}={name}")
        return {"labelSelector": ",".join(labels) or None, "fieldSelector": fields}

    def namespace_of(self, rk: ResourceKind) -> str | None:
        if not rk.namespaced:
            return None
        return self.job.split("/", 1)[0] if self.job is not None else self.namespace

    def keeps(self, rk: ResourceKind, obj: dict) -> bool:
        """The filters the API cannot apply: a job's podgroup and Commands."""
        if self.job is None:
            return True
        name = self.job.split("/", 1)[1]
        if rk.name == "podgroups":
            meta = obj.get("metadata") or {}
            return meta.get("name") == name or any(owner == name for owner, _ in job_owners(obj))
        if rk.name == "commands":
            target = obj.get("target") or {}
            return target.get("kind") == "Job" and target.get("name") == name
        return True


def resource_kind(name: str) -> ResourceKind:
    try:
        return _resource_kind(name)
    except ValueError as err:
        raise UserError(f"--kind {name!r}: {err}") from None


def _rv(obj: dict) -> int:
    text = (obj.get("metadata") or {}).get("resourceVersion") or ""
    return int(text) if text.isdigit() else 0


class Recorder:
    def __init__(
        self,
        api_client: Any,
        kinds: tuple[str, ...] = DEFAULT_KINDS,
        *,
        scope: Scope = Scope(),
        write: Callable[[bytes], None],
        window: float = 0.5,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.api = api_client
        self.kinds = [resource_kind(k) for k in kinds]
        self.scope = scope
        self.write = write
        self.window = window
        self.warn = warn or (lambda message: log.warning("%s", message))
        self.counts: dict[str, int] = {rk.name: 0 for rk in self.kinds}
        self.written = 0
        self.revision: str | None = None  # the snapshot's resourceVersion
        self._positions: dict[str, str] = {}
        self._known: dict[str, dict[str, dict]] = {}
        self._queue: queue.Queue = queue.Queue()
        self._watchers: list[ResourceWatcher] = []
        self._pumps: list[threading.Thread] = []
        self._high = 0  # highest resourceVersion written or waiting
        self._kind_high: dict[str, int] = {}

    # ------------------------------------------------------------------ 1. the snapshot

    def snapshot(self) -> None:
        """List every kind at one revision and write the objects as ADDED, in resourceVersion order."""
        listed: list[tuple[int, str, dict]] = []
        for rk in self.kinds:
            items, rv = self._list(rk, self.revision)
            if self.revision is None:
                self.revision = rv
            self._positions[rk.name] = rv
            self._known[rk.name] = {}
            for obj in items:
                obj = normalize(obj, rk, write_times=True)
                if not self.scope.keeps(rk, obj):
                    continue
                uid = (obj.get("metadata") or {}).get("uid")
                if uid:
                    self._known[rk.name][uid] = obj
                listed.append((_rv(obj), rk.name, obj))
        listed.sort(key=lambda e: e[0])
        before, after = initial_list_marks(self.revision or "")
        self.write(_encode(before) + b"\n")
        for rv, kind, obj in listed:
            self._write(kind, "ADDED", obj)
        self.write(_encode(after) + b"\n")
        for kind, rv in self._positions.items():  # what a relist's DELETED can be older than
            self._kind_high[kind] = _rv_text(rv)
        self._high = max([self._high, *self._kind_high.values()])

    def _list(self, rk: ResourceKind, revision: str | None) -> tuple[list[dict], str]:
        try:
            return self._list_at(rk, revision)
        except KubeApiError as err:
            if revision is None or err.status in (401, 403, 404):
                raise self._error(rk, err) from None
            self.warn(f"cannot list {rk.name} at resourceVersion {revision} ({err}); listed at its latest instead")
            try:
                return self._list_at(rk, None)
            except KubeApiError as err2:
                raise self._error(rk, err2) from None
        except (urllib3.exceptions.HTTPError, OSError) as err:
            host = getattr(getattr(self.api, "configuration", None), "host", "the API server")
            raise UserError(f"cannot reach the Kubernetes API server at {host}: {_reason(err)}",
                            exit_code=exitcodes.CLUSTER) from None

    def _list_at(self, rk: ResourceKind, revision: str | None) -> tuple[list[dict], str]:
        items: list[dict] = []
        cont = None
        path = rk.path(self.scope.namespace_of(rk))
        while True:
            q: dict[str, Any] = {"limit": 500, "continue": cont, **self.scope.query(rk)}
            if revision is not None and cont is None:
                q.update(resourceVersion=revision, resourceVersionMatch="Exact")
            page = api_request(self.api, "GET", path, query=q, timeout=(5.0, 60.0))
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                return items, meta.get("resourceVersion") or ""

    def _error(self, rk: ResourceKind, err: KubeApiError) -> UserError:
        where = f"in namespace {self.scope.namespace_of(rk)}" if self.scope.namespace_of(rk) else "in all namespaces"
        if not rk.namespaced:
            where = "(cluster-wide)"
        body = err.body if isinstance(err.body, dict) else {}
        message = body.get("message") or str(err.body)[:200]
        if err.status == 404:
            return UserError(
                f"cannot list {rk.name}: the API server does not serve {rk.api_version} {rk.plural} "
                f"(are Volcano's CRDs installed? see deploy/crds); leave it out with --kind",
                exit_code=exitcodes.CLUSTER,
            )
        if err.status in (401, 403):
            return UserError(f"cannot list {rk.name} {where}: HTTP {err.status} {body.get('reason') or ''}: {message}",
                             exit_code=exitcodes.CLUSTER)
        return UserError(f"cannot list {rk.name} {where}: HTTP {err.status}: {message}", exit_code=exitcodes.CLUSTER)

    # ------------------------------------------------------------------ 2. the watches

    def start(self) -> None:
        for rk in self.kinds:
            q = self.scope.query(rk)
            watcher = ResourceWatcher(
                self.api, rk, namespace=self.scope.namespace_of(rk),
                label_selector=q["labelSelector"] or "", field_selector=q["fieldSelector"],
                resource_version=self._positions[rk.name] or None, known=self._known.pop(rk.name, {}),
                write_times=True,
            )
            self._watchers.append(watcher)
            watcher.start()
            pump = threading.Thread(target=self._pump, args=(rk, watcher), name=f"record-{rk.name}", daemon=True)
            self._pumps.append(pump)
            pump.start()

    def _pump(self, rk: ResourceKind, watcher: ResourceWatcher) -> None:
        try:
            for event in watcher:
                self._queue.put((rk, event))
        except BaseException as err:  # a watcher bug: tell the main loop
            self._queue.put((rk, err))

    def run(self, stop: threading.Event, *, deadline: float | None = None, on_tick: Callable[[], None] | None = None):
        """Write watch events in resourceVersion order until `stop` or `deadline` (time.monotonic())."""
        waiting: list[tuple[int, int, float, ResourceKind, dict]] = []
        order = 0
        try:
            while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
                now = time.monotonic()
                timeout = 0.25
                if waiting:
                    timeout = max(0.0, min(timeout, waiting[0][2] + self.window - now))
                if deadline is not None:
                    timeout = max(0.0, min(timeout, deadline - now))
                try:
                    rk, event = self._queue.get(timeout=timeout)
                except queue.Empty:
                    pass
                else:
                    order += 1
                    heapq.heappush(waiting, self._entry(rk, event, order))
                    while True:  # take everything already there
                        try:
                            rk, event = self._queue.get_nowait()
                        except queue.Empty:
                            break
                        order += 1
                        heapq.heappush(waiting, self._entry(rk, event, order))
                now = time.monotonic()
                while waiting and waiting[0][2] + self.window <= now:
                    _, _, _, rk, event = heapq.heappop(waiting)
                    self._write(rk.name, event["type"], event["object"])
                if on_tick is not None:
                    on_tick()
        finally:
            self.stop()
            while True:  # what arrived until the watches stopped
                try:
                    rk, event = self._queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(event, dict):
                    order += 1
                    heapq.heappush(waiting, self._entry(rk, event, order))
            while waiting:
                _, _, _, rk, event = heapq.heappop(waiting)
                self._write(rk.name, event["type"], event["object"])

    def _entry(self, rk: ResourceKind, event: Any, order: int) -> tuple[int, int, float, ResourceKind, dict]:
        if isinstance(event, BaseException):
            raise event
        obj = event["object"]
        rv = _rv(obj)
        if event["type"] == "DELETED" and rv <= self._kind_high.get(rk.name, 0):
            # a relist found it gone: it went at some revision after the last one we saw
            rv = max(self._high, rv)
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(rv)
        if rv > self._kind_high.get(rk.name, 0):
            self._kind_high[rk.name] = rv
        self._high = max(self._high, rv)
        return (rv, order, time.monotonic(), rk, event)

    def stop(self) -> None:
        for w in self._watchers:
            w.stop(timeout=2.0)
        for pump in self._pumps:  # each ends once its watcher's queue is drained
            pump.join(timeout=2.0)
        self._watchers, self._pumps = [], []

    def _write(self, kind: str, event_type: str, obj: dict) -> None:
        rk = _resource_kind(kind)
        if not self.scope.keeps(rk, obj):
            return
        record: dict = {"type": event_type, "object": redact_job(obj)}  # no private keys in logs
        if kind == "cronjobs":  # the zones it names, as the bridge adds them (a replay reads no tz database)
            record["zones"] = cronjob_zones(obj)
        self.write(_encode(record) + b"\n")
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.written += 1


def _rv_text(text: str) -> int:
    return int(text) if text.isdigit() else 0


def _reason(err: BaseException) -> str:
    reason = getattr(err, "reason", None)
    text = str(reason or err)
    if "Connection refused" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "unknown host"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "TLS certificate not trusted"
    return text.split(": ", 1)[-1][:200]
