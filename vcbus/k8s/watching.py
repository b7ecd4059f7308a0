"""List-then-watch of one Kubernetes resource, yielding kubectl-shaped watch events.

Every event is a plain dict in exactly the shape of
`kubectl get <res> --watch --output-watch-events -o json`::

    {"type": "ADDED" | "MODIFIED" | "DELETED",
     "object": {...the full object, apiVersion and kind set, metadata.managedFields removed}}

Concurrency model: a **thread-driven generator**. `ResourceWatcher.start()`
spawns one daemon thread that talks to the apiserver with the official
`kubernetes` client (its `ApiClient` for auth/TLS; raw JSON, no model
classes, so unknown fields survive) and feeds a bounded queue. The caller
consumes with any of

* ``for event in watcher:`` - blocks; ends after `stop()`;
* ``watcher.next_event(timeout)`` - one event or `TimeoutError`;
* ``async for event in watcher:`` - the same from asyncio (the blocking queue
  read runs in a worker thread; the event loop is never blocked);
* ``watcher.poll()`` - the next event or None at once, never blocking, with
  ``watcher.on_item`` set to a callable the watcher's thread calls after each
  item it queues (`vcbus.k8s.bridge` sets it to wake its event loop: no thread
  waits, nothing polls, an idle watcher costs nothing).

Semantics:

* Without a start position the watcher lists the resource and yields ADDED
  for every object (list order), then watches from the list's
  resourceVersion.
* `resource_version=` resumes a watch from a stored position: only changes
  after it are yielded (nothing is repeated).
* The watch asks for bookmarks (`allowWatchBookmarks`); a BOOKMARK is not
  yielded but moves the position forward.
* A `410 Gone` (HTTP status or ERROR event, e.g. after etcd compaction or an
  apiserver restart whose watch cache starts later) triggers a relist. The
  relist is diffed against the known set, keyed by uid: DELETED (with the last
  known object) for objects that vanished meanwhile, ADDED for new uids,
  MODIFIED for objects whose resourceVersion changed; unchanged ones are not
  repeated. A name that was deleted and recreated shows as DELETED then ADDED.
* Connection errors, apiserver restarts and other API errors are retried with
  jittered exponential backoff (`vcbus.retries`, from `backoff_initial` up to
  `backoff_max`: `retries.WATCH` by default; reset once a watch is established; the log says when the
  next try is). 401/403 are not retried: the consumer gets the error. A normal end of the watch stream (server-side
  `timeoutSeconds`) reconnects immediately.

Resume position: `resource_version` and `known` describe what the *caller has
consumed* (not what the thread has buffered), so persisting `snapshot()` after
handling an event and passing it back via `ResourceWatcher.from_snapshot()`
loses and repeats nothing. Events synthesised by one relist carry the old
position except the last one, which carries the list's resourceVersion.

`synced` (a `threading.Event`, like an informer's HasSynced) is set once the
caller has consumed the whole first list, or at once when resuming from a
position (there is no list to wait for): a consumer feeding several watchers
into one log can hold one resource back until the others have listed.

This module only yields events; publishing them (e.g. to NATS) is the
caller's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import msgspec

from vcbus import retries
from vcbus.writetimes import kept_writes

log = logging.getLogger(__name__)

JOB_NAME_LABEL = "volcano.sh/job-name"


# --------------------------------------------------------------------------- resources


@dataclass(frozen=True)
class ResourceKind:
    name: str
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    default_label_selector: str | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


RESOURCES: dict[str, ResourceKind] = {
    r.name: r
    for r in (
        ResourceKind("vcjobs", "batch.volcano.sh", "v1alpha1", "jobs", "Job", True),
        ResourceKind("pods", "", "v1", "pods", "Pod", True, default_label_selector=JOB_NAME_LABEL),
        ResourceKind("podgroups", "scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True),
        ResourceKind("queues", "scheduling.volcano.sh", "v1beta1", "queues", "Queue", False),
        ResourceKind("commands", "bus.volcano.sh", "v1alpha1", "commands", "Command", True),
        ResourceKind("nodes", "", "v1", "nodes", "Node", False),
        ResourceKind("priorityclasses", "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
        # the namespaces' labels, for the scheduler's pod affinity namespaceSelector
        ResourceKind("namespaces", "", "v1", "namespaces", "Namespace", False),
        # claims, volumes and classes, for the scheduler's volume checks (VolumeZone, VolumeBinding)
        ResourceKind("persistentvolumeclaims", "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
        ResourceKind("persistentvolumes", "", "v1", "persistentvolumes", "PersistentVolume", False),
        ResourceKind("storageclasses", "storage.k8s.io", "v1", "storageclasses", "StorageClass", False),
        # the nodes' CSI volume limits and attached volumes, for the scheduler's NodeVolumeLimits
        ResourceKind("csinodes", "storage.k8s.io", "v1", "csinodes", "CSINode", False),
        ResourceKind("volumeattachments", "storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False),
        # the selectors of Services and ReplicationControllers (with the ReplicaSets' and StatefulSets'):
        # the scheduler's system-default topology spreading
        ResourceKind("services", "", "v1", "services", "Service", True),
        ResourceKind("replicationcontrollers", "", "v1", "replicationcontrollers", "ReplicationController", True),
        # a pod's owners, for Volcano's podgroup controller (statemachines/podgroups/) and the scheduler
        ResourceKind("replicasets", "apps", "v1", "replicasets", "ReplicaSet", True),
        ResourceKind("statefulsets", "apps", "v1", "statefulsets", "StatefulSet", True),
        ResourceKind("daemonsets", "apps", "v1", "daemonsets", "DaemonSet", True),
        ResourceKind("batchjobs", "batch", "v1", "jobs", "Job", True),  # a batch/v1 Job (not a vcjob)
        # Volcano's CronJob (statemachines/cronjobs/)
        ResourceKind("cronjobs", "batch.volcano.sh", "v1alpha1", "cronjobs", "CronJob", True),
        # Volcano's JobFlow and JobTemplate (statemachines/jobflows/)
        ResourceKind("jobflows", "flow.volcano.sh", "v1alpha1", "jobflows", "JobFlow", True),
        ResourceKind("jobtemplates", "flow.volcano.sh", "v1alpha1", "jobtemplates", "JobTemplate", True),
    )
}

_ALIASES = {
    "vcjob": "vcjobs", "vj": "vcjobs", "job": "vcjobs", "jobs": "vcjobs",
    "jobs.batch.volcano.sh": "vcjobs",
    "pod": "pods", "po": "pods",
    "podgroup": "podgroups", "pg": "podgroups", "podgroups.scheduling.volcano.sh": "podgroups",
    "queue": "queues", "q": "queues", "queues.scheduling.volcano.sh": "queues",
    "command": "commands", "commands.bus.volcano.sh": "commands",
    "node": "nodes", "no": "nodes",
    "priorityclass": "priorityclasses", "pc": "priorityclasses",
    "priorityclasses.scheduling.k8s.io": "priorityclasses",
    "namespace": "namespaces", "ns": "namespaces",
    "persistentvolumeclaim": "persistentvolumeclaims", "pvc": "persistentvolumeclaims",
    "persistentvolume": "persistentvolumes", "pv": "persistentvolumes",
    "storageclass": "storageclasses", "sc": "storageclasses", "storageclasses.storage.k8s.io": "storageclasses",
    "csinode": "csinodes", "csinodes.storage.k8s.io": "csinodes",
    "volumeattachment": "volumeattachments", "volumeattachments.storage.k8s.io": "volumeattachments",
    "service": "services", "svc": "services",
    "replicationcontroller": "replicationcontrollers", "rc": "replicationcontrollers",
    "replicaset": "replicasets", "rs": "replicasets", "replicasets.apps": "replicasets",
    "statefulset": "statefulsets", "sts": "statefulsets", "statefulsets.apps": "statefulsets",
    "daemonset": "daemonsets", "ds": "daemonsets", "daemonsets.apps": "daemonsets",
    "batchjob": "batchjobs", "jobs.batch": "batchjobs",
    "cronjob": "cronjobs", "cronvcjob": "cronjobs", "cronvj": "cronjobs", "cronjobs.batch.volcano.sh": "cronjobs",
    "jobflow": "jobflows", "jf": "jobflows", "jobflows.flow.volcano.sh": "jobflows",
    "jobtemplate": "jobtemplates", "jt": "jobtemplates", "jobtemplates.flow.volcano.sh": "jobtemplates",
}


def resource_kind(name: str | ResourceKind) -> ResourceKind:
    """Look up a watchable resource by name, plural, short name or `plural.group`."""
    if isinstance(name, ResourceKind):
        return name
    key = name.lower()
    key = _ALIASES.get(key, key)
    try:
        return RESOURCES[key]
    except KeyError:
        raise ValueError(f"unknown resource {name!r}; known: {', '.join(RESOURCES)}") from None


# --------------------------------------------------------------------------- raw API access


class KubeApiError(Exception):
    """A non-2xx answer from the apiserver (or an ERROR watch event)."""

    def __init__(self, status: int, body: Any, *, method: str = "", path: str = ""):
        self.status = status
        self.body = body
        msg = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status}: {msg}".strip())

    @property
    def reason(self) -> str | None:
        return self.body.get("reason") if isinstance(self.body, dict) else None


_decode = msgspec.json.Decoder().decode  # JSON as plain dicts and lists (as json.loads gives them)

class GoneError(KubeApiError):
    """410 Gone: the requested resourceVersion is no longer available."""


def _error(status: int, raw: bytes, method: str, path: str) -> KubeApiError:
    try:
        body: Any = _decode(raw)
    except ValueError:
        body = raw.decode(errors="replace")
    cls = GoneError if status == 410 else KubeApiError
    return cls(status, body, method=method, path=path)


def api_request(
    api_client,
    method: str,
    path: str,
    *,
    query: dict[str, Any] | None = None,
    body: Any = None,
    content_type: str | None = None,
    accept: str = "application/json",
    timeout: float | tuple[float, float] | None = 30.0,
    stream: bool = False,
):
    """One request through a `kubernetes.client.ApiClient` (its host, TLS and auth).

    Returns the decoded JSON body, or with `stream=True` the open urllib3
    response (the caller reads and closes it). Raises `KubeApiError`
    (`GoneError` for 410) on a non-2xx status.
    """
    headers = {"Accept": accept}
    if body is not None:
        headers["Content-Type"] = content_type or "application/json"
    q = [(k, v) for k, v in (query or {}).items() if v is not None]
    m, url, hdrs, b, post = api_client.param_serialize(
        method=method,
        resource_path=path,
        query_params=q,
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    resp = api_client.call_api(m, url, header_params=hdrs, body=b, post_params=post, _request_timeout=timeout)
    if not 200 <= resp.status <= 299:
        raise _error(resp.status, resp.read(), method, path)
    if stream:
        return resp.response
    data = resp.read()
    return _decode(data) if data else None


def normalize(obj: dict, rk: ResourceKind, *, write_times: bool = False) -> dict:
    """The object as kubectl prints it: apiVersion/kind set, managedFields dropped.

    `write_times` (recordings): each managedFields entry keeps who wrote and when (vcbus.writetimes),
    and only its field set (the bulk) goes. A replay's clock reads those times where a log
    carries none of its own (statemachines.model.record_time), so a recording then replays
    with the same times as kubectl's output of the same changes."""
    obj.setdefault("apiVersion", rk.api_version)
    obj.setdefault("kind", rk.kind)
    # Keep apiVersion/kind first, as kubectl does.
    head = {"apiVersion": obj.pop("apiVersion"), "kind": obj.pop("kind")}
    out = {**head, **obj}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        fields = meta.pop("managedFields", None)
        kept = kept_writes(fields) if write_times else None
        if kept is not None:
            meta["managedFields"] = kept
    return out


def _iter_lines(resp) -> Iterator[bytes]:
    buf = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buf += chunk
        while True:
            i = buf.find(b"\n")
            if i < 0:
                break
            line, buf = buf[:i], buf[i + 1 :]
            if line.strip():
                yield line
    if buf.strip():
        yield buf


# --------------------------------------------------------------------------- the watcher


_STOP = object()


@dataclass
class _Item:
    event: dict | None  # None: position update only (bookmark, empty relist)
    rv: str | None
    listed: bool = False  # the last item of a relist: consuming it completes the list


def _name_of(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class ResourceWatcher:
    """List-then-watch one resource in a background thread; see the module docstring.

    Parameters: `api_client` (a `kubernetes.client.ApiClient`), `resource`
    (name/short name, see `RESOURCES`), `namespace` (None = all namespaces;
    ignored for cluster-scoped resources), `label_selector` (default: the
    resource's default, `volcano.sh/job-name` for pods; pass "" for none),
    `field_selector`, `resource_version` (resume position), `known` (uid ->
    last yielded object, as from `snapshot()`).
    """

    def __init__(
        self,
        api_client,
        resource: str | ResourceKind,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        known: dict[str, dict] | None = None,
        watch_timeout_seconds: int = 300,
        connect_timeout: float = 5.0,
        backoff_initial: float = retries.WATCH.initial,
        backoff_max: float = retries.WATCH.maximum,
        page_size: int = 500,
        queue_size: int = 1000,
        write_times: bool = False,
    ):
        self.api = api_client
        self.rk = resource_kind(resource)
        self.namespace = namespace if self.rk.namespaced else None
        self.label_selector = self.rk.default_label_selector if label_selector is None else (label_selector or None)
        self.field_selector = field_selector or None
        self.watch_timeout_seconds = int(watch_timeout_seconds)
        self.connect_timeout = connect_timeout
        self.retry = retries.Policy(backoff_initial, backoff_max)  # a failed list or watch: the wait before the next
        self.page_size = page_size
        self.write_times = write_times  # objects keep their managedFields' write times (`normalize`)

        # Thread side: what has been queued.
        self._rv: str | None = resource_version or None
        self._need_list = self._rv is None
        self._known: dict[str, dict] = copy.deepcopy(known) if known else {}
        # Consumer side: what the caller has taken (the resume position).
        self._pos_rv: str | None = self._rv
        self._pos_known: dict[str, dict] = copy.deepcopy(self._known)
        self._pos_names: dict[tuple[str, str], str] = {_name_of(obj): uid for uid, obj in self._pos_known.items()}

        self._q: queue.Queue = queue.Queue(maxsize=queue_size)
        # called by the watcher's thread after each item it queues (an event, a position, the end); set it
        # before `start`; it must not block (e.g. `loop.call_soon_threadsafe(wake.set)`)
        self.on_item: Callable[[], None] | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._resp = None
        self._resp_lock = threading.Lock()
        self._fatal: BaseException | None = None
        self._finished = False

        # Observability (tests, logs).
        self.last_error: BaseException | None = None
        self.relists = 0
        self.reconnects = 0
        self.bookmarks = 0
        self.connected = threading.Event()
        self.synced = threading.Event()  # the first list consumed (see the module docstring)
        if not self._need_list:
            self.synced.set()

    @classmethod
    def from_snapshot(cls, api_client, resource, snapshot: dict, **kw) -> "ResourceWatcher":
        return cls(
            api_client,
            resource,
            resource_version=snapshot.get("resourceVersion"),
            known=snapshot.get("known") or {},
            **kw,
        )

    # ---- consumer API

    @property
    def resource_version(self) -> str | None:
        """Position after the last event the caller consumed (persist this)."""
        return self._pos_rv

    @property
    def known(self) -> dict[str, dict]:
        """uid -> last consumed object, for objects that currently exist."""
        return self._pos_known

    def by_name(self, namespace: str, name: str) -> dict | None:
        """The last consumed object of that namespace ("" if cluster-scoped) and name, or None.

        Safe to call from other threads (one dict read each). An object resumed from a stored
        position may be only the metadata that position keeps (`vcbus.k8s.bridge.trim`)."""
        uid = self._pos_names.get((namespace, name))
        return None if uid is None else self._pos_known.get(uid)

    def snapshot(self, transform: Callable[[dict], dict] | None = None) -> dict:
        """JSON-serialisable resume state: {"resourceVersion", "known"}.

        The known objects are deep copies, or `transform(obj)` of each when given: a transform that
        builds what it returns (the bridge keeps only each object's metadata) saves copying whole
        objects that are then thrown away."""
        if transform is not None:
            return {"resourceVersion": self._pos_rv, "known": {uid: transform(obj) for uid, obj in self._pos_known.items()}}
        return {"resourceVersion": self._pos_rv, "known": copy.deepcopy(self._pos_known)}

    def start(self) -> "ResourceWatcher":
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"watch-{self.rk.name}", daemon=True
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        self._abort_stream()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> "ResourceWatcher":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _take(self, timeout: float | None, *, block: bool = True) -> dict | None:
        """Next event (None on timeout, or at once when not `block`); raises StopIteration when finished."""
        if self._finished:
            raise StopIteration
        if self._thread is None:
            self.start()
        while True:
            try:
                item = self._q.get(block, timeout)
            except queue.Empty:
                return None
            if item is _STOP:
                self._finished = True
                if self._fatal is not None:
                    raise self._fatal
                raise StopIteration
            self._consume(item)
            if item.event is not None:
                return item.event

    def _consume(self, item: _Item) -> None:
        ev = item.event
        if ev is not None:
            uid = ev["object"].get("metadata", {}).get("uid")
            if uid:
                name = _name_of(ev["object"])
                if ev["type"] == "DELETED":
                    self._pos_known.pop(uid, None)
                    if self._pos_names.get(name) == uid:
                        del self._pos_names[name]
                else:
                    self._pos_known[uid] = ev["object"]
                    self._pos_names[name] = uid
        if item.rv:
            self._pos_rv = item.rv
        if item.listed:
            self.synced.set()

    def poll(self) -> dict | None:
        """The next event if one is queued, else None, at once; `EOFError` once the watcher has stopped."""
        try:
            return self._take(None, block=False)
        except StopIteration:
            raise EOFError("watcher stopped") from None

    def next_event(self, timeout: float | None = None) -> dict:
        """The next event; `TimeoutError` if none within `timeout` seconds."""
        try:
            ev = self._take(timeout)
        except StopIteration:
            raise EOFError("watcher stopped") from None
        if ev is None:
            raise TimeoutError(f"no {self.rk.name} event within {timeout}s")
        return ev

    def __iter__(self) -> Iterator[dict]:
        while True:
            try:
                ev = self._take(None)
            except StopIteration:
                return
            if ev is not None:
                yield ev

    def __aiter__(self):
        return self

    def _take_or_end(self, timeout: float | None):
        # StopIteration cannot cross a Future (asyncio.to_thread): map it to _STOP.
        try:
            return self._take(timeout)
        except StopIteration:
            return _STOP

    async def __anext__(self) -> dict:
        while True:
            ev = await asyncio.to_thread(self._take_or_end, 0.25)
            if ev is _STOP:
                raise StopAsyncIteration
            if ev is not None:
                return ev

    # ---- thread side

    def _put(self, item) -> None:
        while True:
            try:
                self._q.put(item, timeout=0.25)
                break
            except queue.Full:
                if self._stopping.is_set():
                    raise _Stopped() from None
        self._notify()

    def _notify(self) -> None:
        if self.on_item is not None:
            self.on_item()

    def _emit(self, type_: str, obj: dict, rv: str | None, *, listed: bool = False) -> None:
        uid = obj.get("metadata", {}).get("uid")
        if uid:
            if type_ == "DELETED":
                self._known.pop(uid, None)
            else:
                self._known[uid] = obj
        self._put(_Item({"type": type_, "object": obj}, rv, listed))

    def _run(self) -> None:
        streak = retries.Streak(self.retry)
        try:
            while not self._stopping.is_set():
                try:
                    if self._need_list:
                        self._relist()
                    if self._watch_once():
                        streak.reset()
                except GoneError as e:
                    log.info("watch %s: %s; relisting", self.rk.name, e)
                    self._need_list = True
                except _Stopped:
                    break
                except Exception as e:  # any failure: back off and retry
                    if self._stopping.is_set():
                        break
                    if isinstance(e, KubeApiError) and e.status in (401, 403):
                        raise  # denied: retrying cannot help; the consumer gets it (`_fatal`)
                    self.last_error = e
                    self.reconnects += 1
                    delay = streak.failed()
                    log.warning("watch %s failed (%s: %s); next try in %.1fs",
                                self.rk.name, type(e).__name__, e, delay)
                    self._stopping.wait(delay)
        except BaseException as e:  # a bug: surface it to the consumer
            self._fatal = e
        finally:
            self.connected.clear()
            try:
                self._q.put(_STOP, timeout=5)
            except queue.Full:
                pass
            with contextlib.suppress(Exception):  # the loop it would wake may be closed already
                self._notify()

    def _selectors(self) -> dict[str, str | None]:
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}

    def _relist(self) -> None:
        items: list[dict] = []
        cont = None
        while True:
            try:
                page = api_request(
                    self.api, "GET", self.rk.path(self.namespace),
                    query={"limit": self.page_size, "continue": cont, **self._selectors()},
                    timeout=(self.connect_timeout, 60.0),
                )
            except GoneError:
                if cont is None:
                    raise
                items, cont = [], None  # continue token expired: start over
                continue
            items.extend(page.get("items") or [])
            cont = (page.get("metadata") or {}).get("continue")
            list_rv = (page.get("metadata") or {}).get("resourceVersion")
            if not cont:
                break
        self.relists += 1

        current = {}
        for obj in items:
            obj = normalize(obj, self.rk, write_times=self.write_times)
            current[obj["metadata"]["uid"]] = obj
        events: list[tuple[str, dict]] = []
        for uid, old in list(self._known.items()):
            if uid not in current:
                events.append(("DELETED", old))
        for uid, obj in current.items():
            old = self._known.get(uid)
            if old is None:
                events.append(("ADDED", obj))
            elif old.get("metadata", {}).get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                events.append(("MODIFIED", obj))
        # Until the whole batch is consumed the safe resume point stays the
        # position before the relist: a consumer that stops mid-batch relists again.
        prev_rv = self._rv
        for i, (t, obj) in enumerate(events):
            last = i == len(events) - 1
            self._emit(t, obj, list_rv if last else prev_rv, listed=last)
        if not events:
            self._put(_Item(None, list_rv, listed=True))
        self._rv = list_rv
        self._need_list = False

    def _abort_stream(self) -> None:
        with self._resp_lock:
            resp = self._resp
        if resp is None:
            return
        try:
            shutdown = getattr(resp, "shutdown", None)
            if shutdown is not None:
                shutdown()
            resp.close()
        except Exception:  # closing a dying connection
            pass

    def _watch_once(self) -> bool:
        """One watch request; returns True if it was established (HTTP 200)."""
        query = {
            "watch": "true",
            "resourceVersion": self._rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": self.watch_timeout_seconds,
            **self._selectors(),
        }
        resp = api_request(
            self.api, "GET", self.rk.path(self.namespace), query=query, stream=True,
            timeout=(self.connect_timeout, self.watch_timeout_seconds + 30.0),
        )
        with self._resp_lock:
            self._resp = resp
        if self._stopping.is_set():
            self._abort_stream()
        self.connected.set()
        try:
            for line in _iter_lines(resp):
                if self._stopping.is_set():
                    raise _Stopped()
                ev = _decode(line)  # msgspec: several times faster than json on a burst of pods
                t, obj = ev.get("type"), ev.get("object") or {}
                if t == "ERROR":
                    code = obj.get("code") or 500
                    cls = GoneError if code == 410 else KubeApiError
                    raise cls(code, obj, method="WATCH", path=self.rk.path(self.namespace))
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if t == "BOOKMARK":
                    self.bookmarks += 1
                    if rv:
                        self._rv = rv
                        self._put(_Item(None, rv))
                    continue
                if t not in ("ADDED", "MODIFIED", "DELETED"):
                    log.warning("watch %s: ignoring event type %r", self.rk.name, t)
                    continue
                self._emit(t, normalize(obj, self.rk, write_times=self.write_times), rv)
                if rv:
                    self._rv = rv
        except _Stopped:
            raise
        except Exception:
            if self._stopping.is_set():
                raise _Stopped() from None
            raise
        finally:
            self.connected.clear()
            with self._resp_lock:
                self._resp = None
            try:
                resp.release_conn()
            except Exception:  # closing a connection that is going away anyway
                pass
        return True


class _Stopped(Exception):
    pass


def watch(api_client, resource: str, **kw) -> Iterator[dict]:
    """Convenience: iterate the events of a `ResourceWatcher` (stopped when the generator closes)."""
    w = ResourceWatcher(api_client, resource, **kw).start()
    try:
        yield from w
    finally:
        w.stop()
