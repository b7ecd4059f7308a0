"""The watch bridge: Kubernetes watch events into VCBUS_K8S, resumable.

One `ResourceWatcher` (vcbus.k8s.watching: list-then-watch, bookmarks, relist
on 410 Gone with DELETED for what vanished, backoff on errors) per resource
vcbus reads: vcjobs, pods, podgroups, queues and commands (the job
controller), and the cluster-scoped nodes, priorityclasses, namespaces,
persistentvolumes, storageclasses, csinodes and volumeattachments, and the persistentvolumeclaims, services
and replicationcontrollers (only the scheduler reads those: the job
controller's decode ignores them,
vcbus.bus.publisher publishes them all the same, on `vcbus.k8s.node._.<name>`,
`vcbus.k8s.persistentvolumeclaim.<namespace>.<name>` and so on). Each event
becomes a watch record stamped with the time the bridge observed it (`"time"`,
the event time the state machines use) and is published with its dedup id
`<uid>:<resourceVersion>:<type>`.

A pod's owners (ReplicaSets, StatefulSets, DaemonSets: the kinds whose annotations Volcano's
podgroup controller reads, statemachines/podgroups/) are published when their pod template is
for one of `scheduler_names` (`owner_wanted`), and pods are held back until the owners' first
lists are in the stream, so that a pod listed at start-up comes after its owner. After, the watches
of pods and of owners are apart, and a ReplicaSet's first pods can come before the ReplicaSet (the
podgroup controller would build their PodGroup without its annotations: a gang of one): a pod for
our scheduler with no `scheduling.k8s.io/group-name` annotation, whose controlling owner is of a
kind bridged here, is published once its owner's watch has brought that owner, waiting at most
`OWNER_WAIT` seconds (an owner deleted meanwhile never comes; Volcano's Get would fail too). The scheduler
reads the ReplicaSets' and StatefulSets' selectors too, and the ReplicationControllers' (published
under the same rule) and every Service's: the system-default topology spreading of the pods they
select (statemachines/scheduler/workloads.py).

Volcano's CronJobs (`batch.volcano.sh/v1alpha1`, statemachines/cronjobs/) are published with one
more field, `zones`: the time zones each names, read here from the tz database
(vcbus/cronjobs/zonedata.py), since the domain reads none. A cluster without their CRD (an older
Volcano's CRDs) is told so once and looked at again every `INSTALL_POLL` seconds; until then
CronJobs count as listed, so vcjobs are not held back by them. Volcano's JobFlows and JobTemplates
(`flow.volcano.sh/v1alpha1`, statemachines/jobflows/) are published as they come, their CRDs
optional in the same way.

Pods: every pod is watched, and a pod is published when either reader needs
it, the filter Volcano's own informers use: the job controller reads the pods
of vcjobs (label `volcano.sh/job-name`), the scheduler reads the pods it is
responsible for (`spec.schedulerName` in `scheduler_names`) and every pod on a
node, whoever scheduled it, because it uses the node's resources
(`pkg/scheduler/cache/cache.go`, the pod informer's filter). A pod of another
scheduler is published from the moment it has a node. Other pods never reach
the bus.

Publishing: each resource's loop stores its records in batches of up to 256 (vcbus.bus.publisher's
window), one batch whenever it has 256 or its watch has been quiet for `idle_flush`, and waits for
each batch to be stored before it takes the next records. Given the bus's connection (`nc`, as
`vcbus up` gives it), a batch of 16 or more is one JetStream atomic batch (vcbus.bus.batching: one
fsync for the batch under `sync_interval: always`, where message by message costs one each; a batch
holding a record the stream already has, as after a restart, is stored message by message and the
repeats are dropped); fewer go message by message, for their latency. Every wait stops the loop,
and with fsync on every write an acknowledgement comes only once the server has synced what came
before it. With a wait every 64 records, each message on its own, the pod loop of a 1,000-pod gang restart on a loaded two-core machine spent
52 s of the run's 60 waiting (163 waits, 248 ms at the median), and a pod's ADDED reached the loop
3.75 s after its creation at the median (the watch thread had it after 0.95 s); with one wait per
256, 2.23 s (0.58 s), and the restart's recovery went from 32.3 to 19.7 s (benchmarks/cluster.py
`--only gang --timeline`, `lags`).

Resume: once the publishes of a batch are acknowledged, the watcher's
position (resourceVersion, and the objects it knows, trimmed to apiVersion,
kind and metadata — enough to publish a DELETED for an object that vanished
while the bridge was away) is stored in the KV bucket `vcbus_bridge`, one key
per resource (`<resource>.<namespace>` for a namespaced resource watched in
one namespace): at most once every `SAVE_EVERY` seconds, when the watch goes
quiet (`idle_flush`) or while events keep coming, since the position holds
every known object and costs in proportion to them (a burst of pods that goes
quiet every few milliseconds would otherwise store all of it each time). A restarted bridge resumes
from there: it publishes again at most what came after the last save, and
JetStream drops those records as duplicates (the same `Nats-Msg-Id`, within
the stream's duplicate window). A large position is stored compressed, and one
that cannot be read is ignored with a warning (`vcbus.k8s.positions`).
A cluster-scoped resource has one key whatever the namespace (`nodes`).

Start-up order: Volcano's job controller starts its workers only once every
informer has synced (`cache.WaitForCacheSync` in
pkg/controllers/job/job_controller.go), so no job is ever synced against half
a list of queues, pods or podgroups. The watchers list in parallel, so the
bridge gives the decider the same guarantee through the log: vcjobs records are
published only after the first list of every other resource is in the stream
(a watcher resumed from a stored position has nothing to list). Without it a
job could land between two queues of the queue list and be terminated for a
missing queue that exists. Held longer than `HOLD_WARNING` seconds, the bridge
says which resources it waits for, and why if their watch fails.

Each watcher's thread wakes the bridge's event loop when it has queued
something and the loop is waiting for it (`ResourceWatcher.on_item`, a
`Doorbell`: one wake-up per wait, not per record); the loop then takes what is
there without blocking. Nothing polls: an idle bridge does not run at all (it used
to look at each watcher every `idle_flush`: 140 wake-ups a second for its seven
resources, 3-5% of a core), and an event reaches the loop in one hand-over
between threads instead of two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import msgspec
from nats.js.errors import KeyNotFoundError

from statemachines.model import timefmt
from statemachines.model.records import decode
from vcbus import retries
from vcbus.bus.batching import BatchWriter
from vcbus.bus.publisher import Publisher, prepare
from vcbus.bus.subjects import K8S_STREAM
from vcbus.cronjobs.zonedata import cronjob_zones
from vcbus.k8s import positions
from vcbus.k8s.apierrors import PermissionDenied, denied, permission_denied
from vcbus.k8s.redaction import redact_job
from vcbus.k8s.watching import KubeApiError, ResourceWatcher, api_request, resource_kind

log = logging.getLogger("vcbus.bridge")

# a pod's owners whose annotations the podgroup controller reads (batchjobs: batch/v1 Jobs)
OWNERS = ("replicasets", "statefulsets", "daemonsets", "batchjobs")
# the scheduler's volume checks (VolumeZone, VolumeBinding; NodeVolumeLimits: csinodes, volumeattachments)
VOLUMES = ("persistentvolumeclaims", "persistentvolumes", "storageclasses", "csinodes", "volumeattachments")
SELECTING = ("services", "replicationcontrollers")  # their selectors (and OWNERS'): system-default spreading
RESOURCES = ("vcjobs", "pods", "podgroups", "queues", "commands", "nodes", "priorityclasses", "namespaces", *VOLUMES,
             *SELECTING, *OWNERS)
OWNED_BY_TEMPLATE = (*OWNERS, "replicationcontrollers")  # published when their pods are for our scheduler
# kinds whose CRD a cluster may lack (an older Volcano's CRDs, or none of Volcano's flow CRDs): bridged once installed
OPTIONAL = ("cronjobs", "jobflows", "jobtemplates")
RESOURCES += OPTIONAL  # Volcano's CronJob (each record with the time zones it names: `cronjob_zones`), JobFlow, JobTemplate
INSTALL_POLL = 30.0  # seconds: how often to look again for an OPTIONAL kind's CRD
BRIDGE_BUCKET = "vcbus_bridge"
# published once these resources' first lists are in the stream: vcjobs after every other resource's,
# pods after their owners' (a pod's PodGroup is built with its owner's annotations)
HELD_UNTIL_LISTED = {"vcjobs": None, "pods": OWNERS}
HOLD_WARNING = 30.0  # seconds: say what the held resources wait for, every this often
# a pod's controlling owner (apiVersion group, kind) -> the bridged resource of that owner; a pod waits
# for its owner at most OWNER_WAIT seconds (`Bridge._owner_first`)
OWNER_RESOURCES = {("apps", "ReplicaSet"): "replicasets", ("apps", "StatefulSet"): "statefulsets",
                   ("apps", "DaemonSet"): "daemonsets", ("batch", "Job"): "batchjobs"}
OWNER_WAIT = 10.0
GROUP_NAME = "scheduling.k8s.io/group-name"
SAVE_EVERY = 1.0  # seconds: the position is saved at most this often while events keep coming
SCHEDULER_NAMES = ("volcano",)
JOB_NAME_LABEL = "volcano.sh/job-name"


def pod_wanted(pod: dict, scheduler_names: tuple[str, ...] = SCHEDULER_NAMES) -> bool:
    """Whether a pod reaches the bus: a vcjob's pod, a pod for our scheduler, or a pod on a node."""
    if JOB_NAME_LABEL in ((pod.get("metadata") or {}).get("labels") or {}):
        return True
    spec = pod.get("spec") or {}
    return spec.get("schedulerName") in scheduler_names or bool(spec.get("nodeName"))


def owner_wanted(owner: dict, scheduler_names: tuple[str, ...] = SCHEDULER_NAMES) -> bool:
    """Whether a ReplicaSet, StatefulSet, DaemonSet or ReplicationController reaches the bus: its pods
    are for our scheduler (its pod template's `schedulerName`), or it is gone (a DELETED: its trim has
    no spec)."""
    spec = owner.get("spec")
    if spec is None:
        return True
    template = (spec.get("template") or {}).get("spec") or {}
    return template.get("schedulerName") in scheduler_names
_enc = msgspec.json.Encoder()


class _SecondClock:
    """The bridge's observation time, to the second as Kubernetes writes times: formatted once a second.

    Every watch record gets one; a burst of thousands of pod events in a second shared one string
    instead of formatting a datetime each (1.5% of `vcbus up`'s samples in the gang benchmark).
    """

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def __call__(self) -> str:
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._text = timefmt.fmt(second)
        return self._text


observed_now = _SecondClock()


def position_key(resource: str, namespace: str | None) -> str:
    """The KV key of a watcher's position: per resource, and per namespace when the watch is.

    (A bridge for another namespace must not resume this one's watch: it would
    never list the objects of its own namespace that predate that position.)
    """
    if namespace and resource_kind(resource).namespaced:
        return f"{resource}.{namespace}"
    return resource


def trim(obj: dict) -> dict:
    """What a DELETED record needs of an object: its identity and metadata."""
    meta = dict(redact_job(obj).get("metadata") or {})  # no last-applied key copy in KV either
    meta.pop("managedFields", None)
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": meta}


def _wake_unless_installed(wake: asyncio.Event) -> Any:
    """A done-callback for the probe of an OPTIONAL kind: wakes its loop unless the kind is served (the usual
    answer needs nothing done: the loop sees it when its watcher next has something)."""
    def done(probe: asyncio.Future) -> None:
        if probe.cancelled() or probe.exception() is not None or not probe.result():
            wake.set()
    return done


class Doorbell:
    """How a watcher's thread wakes the bridge's loop: only when the loop is about to wait for an item
    (`arm`, then a last look at the queue), not for every item it queues. A watch burst of thousands
    of records is then a handful of `call_soon_threadsafe` calls (each a write to the loop's self-pipe
    and a turn of the loop), not one per record. The watcher queues an item before it rings and the
    loop arms before its last look, so an item is either seen by that look or rings the bell."""

    __slots__ = ("loop", "event", "armed")

    def __init__(self, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        self.loop, self.event, self.armed = loop, event, True

    def arm(self) -> None:
        self.armed = True

    def ring(self) -> None:  # on the watcher's thread
        if self.armed:
            self.armed = False
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to wake
                self.loop.call_soon_threadsafe(self.event.set)


async def _relay(stop: asyncio.Event, wake: asyncio.Event) -> None:
    await stop.wait()
    wake.set()


class Bridge:
    def __init__(
        self,
        js: Any,
        api_client: Any,
        *,
        namespace: str | None = None,
        resources: tuple[str, ...] = RESOURCES,
        batch: int = 256,  # the publisher's window: one wait for acknowledgements per window of records
        idle_flush: float = 0.05,
        nc: Any = None,
    ) -> None:
        self.js = js
        self.nc = nc  # the bus's connection: with it, each flush is one atomic batch (see the module docstring)
        self._atomic: bool | None = None  # whether VCBUS_K8S takes atomic batches (read once)
        self.api = api_client
        self.namespace = namespace
        self.resources = resources
        self.batch = batch
        self.idle_flush = idle_flush
        self.published = 0
        self.failures = 0
        self.watchers: dict[str, ResourceWatcher] = {}
        self._trimmed: dict[str, dict[str, tuple[dict, msgspec.Raw]]] = {}  # per position key: uid -> (object, its trim)
        # set once a resource's first list is published and acknowledged (see the module docstring)
        self.listed: dict[str, asyncio.Event] = {r: asyncio.Event() for r in resources}
        # per resource, the times its loop went to sleep until its watcher had something (tests)
        self.waits: dict[str, int] = dict.fromkeys(resources, 0)
        self.owners_seen: set[str] = set()  # uids of the pods' owners the owners' loops have forwarded
        self.owner_seen = asyncio.Event()  # set when one more is
        self.owner_waits = 0  # pods that waited for their owner (tests)

    async def _writer(self) -> BatchWriter | None:
        """A writer of atomic batches on the bus's connection, or None: no connection given, or a stream
        (or a server older than 2.12) that takes none; then every record is published on its own."""
        if self.nc is None:
            return None
        if self._atomic is None:
            self._atomic = bool((await self.js.stream_info(K8S_STREAM)).config.allow_atomic)
        return BatchWriter(self.nc) if self._atomic else None

    async def _kv(self):
        try:
            return await self.js.key_value(BRIDGE_BUCKET)
        except Exception:
            # as many replicas as the buckets open_bus made for this bus (3 on a cluster, vcbus.bus.cluster)
            from vcbus.bus.subjects import STATUS_BUCKET

            replicas = (await self.js.stream_info(f"KV_{STATUS_BUCKET}")).config.num_replicas or 1
            return await self.js.create_key_value(bucket=BRIDGE_BUCKET, history=1, replicas=replicas)

    async def run(self, stop: asyncio.Event) -> None:
        kv = await self._kv()
        tasks = [asyncio.create_task(self._run_one(kv, r, stop), name=f"bridge-{r}") for r in self.resources]
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([stopping, *tasks], return_when=asyncio.FIRST_EXCEPTION)  # a denial ends it
            for t in tasks:
                if t.done() and not t.cancelled() and isinstance(t.exception(), PermissionDenied):
                    raise t.exception()
        finally:
            stopping.cancel()
            for w in self.watchers.values():
                w.stop(timeout=2.0)
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    async def _run_one(self, kv: Any, resource: str, stop: asyncio.Event) -> None:
        """Bridge one resource; on a failure (NATS, KV, a bad record) start again from the stored position,
        after a wait of `retries.BRIDGE` (growing with the failures in a row without anything published)."""
        streak = retries.Streak(retries.BRIDGE)
        while not stop.is_set():
            before = self.published
            try:
                await self._bridge(kv, resource, stop)
                return
            except asyncio.CancelledError:
                raise
            except Exception as err:  # keep bridging: the stored position makes a restart lossless
                if denied(err):  # 401/403: retrying cannot help; stop with what to grant
                    raise permission_denied(err, component="bridge", doing=f"watching {resource}", method="GET") from None
                self.failures += 1
                if self.published > before:  # it bridged for a while: a new failure, not one more in a row
                    streak.reset()
                delay = streak.failed()
                log.warning("bridge: %s failed (%s); resuming from the stored position in %.1fs", resource, err, delay)
                old = self.watchers.pop(resource, None)
                if old is not None:
                    await asyncio.to_thread(old.stop, 2.0)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    async def _bridge(self, kv: Any, resource: str, stop: asyncio.Event) -> None:
        # an OPTIONAL kind's CRD may be missing: asked beside the watcher's start, which it does not delay
        probe = asyncio.ensure_future(asyncio.to_thread(self._is_installed, resource)) if resource in OPTIONAL else None
        snapshot = None
        key = position_key(resource, self.namespace)
        with contextlib.suppress(KeyNotFoundError):
            entry = await kv.get(key)
            snapshot = positions.decode(entry.value, key=key)
        if snapshot:
            watcher = ResourceWatcher.from_snapshot(self.api, resource, snapshot, namespace=self.namespace,
                                                    **self._selectors(resource))
        else:
            watcher = ResourceWatcher(self.api, resource, namespace=self.namespace, **self._selectors(resource))
        wanted = pod_wanted if resource == "pods" else owner_wanted if resource in OWNED_BY_TEMPLATE else None
        self.watchers[resource] = watcher
        if resource in OWNERS:
            self.owners_seen.update(watcher.known)  # resumed from a stored position: brought before
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()  # set by the watcher's thread when the loop waits for an item, and by `stop`
        bell = Doorbell(loop, wake)
        watcher.on_item = bell.ring
        watcher.start()
        if probe is not None:
            probe.add_done_callback(_wake_unless_installed(wake))  # a "no" (or a failure) is the loop's to act on
        writer = await self._writer()
        publisher = Publisher(self.js, writer=writer)
        pending = 0
        saved = watcher.resource_version
        saved_at = loop.time()
        if resource in HELD_UNTIL_LISTED:
            await self._hold(resource, stop, HELD_UNTIL_LISTED[resource])
        relay = asyncio.create_task(_relay(stop, wake))
        try:
            while not stop.is_set():
                wake.clear()  # before the look: an item queued after it sets `wake` again
                if probe is not None and probe.done():
                    installed, probe = probe.result(), None
                    if not installed:  # no such kind: stop watching it until its CRD is there
                        self.watchers.pop(resource, None)
                        await asyncio.to_thread(watcher.stop, 2.0)
                        if await self._installed(resource, stop):
                            await self._bridge(kv, resource, stop)  # installed now: from the start
                        return
                try:
                    event = watcher.poll()
                    if event is None:  # about to wait: the next item rings, and one queued just now is seen
                        bell.arm()
                        event = watcher.poll()
                except EOFError:
                    return
                if event is None:
                    if not pending and watcher.resource_version == saved:
                        self._listed(resource, watcher)
                        self.waits[resource] += 1
                        await wake.wait()  # nothing to flush or save: sleep until the watcher has something
                        continue
                    try:  # flushed and saved once the watch has been quiet for `idle_flush`
                        self.waits[resource] += 1
                        await asyncio.wait_for(wake.wait(), self.idle_flush)
                        continue
                    except asyncio.TimeoutError:
                        pass
                if resource == "pods" and event is not None:
                    await self._owner_first(event, stop)
                pending, saved, saved_at = await self._forward(
                    kv, key, watcher, resource, event, wanted, publisher, pending, saved, saved_at)
                if resource in OWNERS and event is not None:
                    uid = (event["object"].get("metadata") or {}).get("uid")
                    if event["type"] == "DELETED":
                        self.owners_seen.discard(uid)
                    else:
                        self.owners_seen.add(uid)
                        self.owner_seen.set()
        finally:
            relay.cancel()
            watcher.on_item = None
            if writer is not None:
                await writer.close()

    async def _forward(self, kv: Any, key: str, watcher: ResourceWatcher, resource: str, event: dict | None,
                       wanted: Any, publisher: Publisher, pending: int, saved: str | None,
                       saved_at: float) -> tuple[int, str | None, float]:
        """Publish `event` (None: the watch is quiet); flush and save the position when it is time."""
        loop = asyncio.get_running_loop()
        if event is not None and (wanted is None or wanted(event["object"])):
            # private keys in plugin arguments never reach the bus (vcbus.k8s.redaction)
            record = {"type": event["type"], "object": redact_job(event["object"]), "time": observed_now()}
            if resource == "cronjobs":
                record["zones"] = cronjob_zones(event["object"])
            data = _enc.encode(record)
            msg = prepare(data, decode(data))
            if msg is not None:
                await publisher.publish(msg)
                pending += 1
        if pending and (event is None or pending >= self.batch):
            await publisher.flush()
            self.published += pending
            pending = 0
            if loop.time() - saved_at >= SAVE_EVERY:
                saved, saved_at = await self._save(kv, key, watcher), loop.time()
        elif event is None and watcher.resource_version != saved and loop.time() - saved_at >= SAVE_EVERY:
            # quiet, or bookmarks moved the position: keep it (the loop comes back every idle_flush until then)
            saved, saved_at = await self._save(kv, key, watcher), loop.time()
        if not pending:
            self._listed(resource, watcher)
        return pending, saved, saved_at

    async def _owner_first(self, event: dict, stop: asyncio.Event) -> None:
        """A pod the podgroup controller will give a PodGroup waits for its controlling owner's record
        (the module docstring), at most `OWNER_WAIT` seconds."""
        pod = event["object"]
        meta = pod.get("metadata") or {}
        if (event["type"] != "ADDED" or (pod.get("spec") or {}).get("schedulerName") not in SCHEDULER_NAMES
                or GROUP_NAME in (meta.get("annotations") or {})):
            return
        ref = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
        if ref is None or ref.get("uid") in self.owners_seen:
            return
        owners = OWNER_RESOURCES.get((str(ref.get("apiVersion", "")).partition("/")[0], ref.get("kind")))
        if owners is None or owners not in self.watchers:
            return
        self.owner_waits += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + OWNER_WAIT
        while ref.get("uid") not in self.owners_seen and not stop.is_set():
            left = deadline - loop.time()
            if left <= 0:
                log.info("bridge: pod %s/%s published without its %s %s, not seen in %.0fs", meta.get("namespace"),
                         meta.get("name"), ref.get("kind"), ref.get("name"), OWNER_WAIT)
                return
            self.owner_seen.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.owner_seen.wait(), left)

    def _is_installed(self, resource: str) -> bool:
        """Whether the API server serves `resource` (False only for a 404: its CRD is not installed)."""
        try:
            api_request(self.api, "GET", resource_kind(resource).path(self.namespace), query={"limit": 1})
        except KubeApiError as err:
            return err.status != 404  # anything else is the watcher's to report and retry (a 403 stops the bridge)
        return True

    async def _installed(self, resource: str, stop: asyncio.Event) -> bool:
        """Wait until `resource`'s CRD is installed (False: stopped first), saying so once. Meanwhile the
        resource counts as listed (it has nothing to wait for), so vcjobs are not held back by it."""
        rk = resource_kind(resource)
        log.warning("bridge: %s (%s/%s) is not installed on the cluster: not bridged; looking again every %.0fs "
                    "(kubectl apply --server-side -f deploy/crds/)", resource, rk.group, rk.version, INSTALL_POLL)
        self.listed[resource].set()
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), INSTALL_POLL)
            if not stop.is_set() and await asyncio.to_thread(self._is_installed, resource):
                log.info("bridge: %s installed: bridging it", resource)
                return True
        return False

    def _listed(self, resource: str, watcher: ResourceWatcher) -> None:
        """Nothing of `resource` is waiting for an ack: once its first list is taken, say it is listed."""
        if watcher.synced.is_set() and not self.listed[resource].is_set():
            self.listed[resource].set()  # everything up to the end of the first list is acknowledged
            log.info("bridge: %s %s (%d objects); watching from resourceVersion %s", resource,
                     "listed" if watcher.relists else "resumed", len(watcher.known), watcher.resource_version)

    @staticmethod
    def _selectors(resource: str) -> dict[str, str]:
        # Every pod, not only the labelled ones the watcher selects by default (see the module docstring).
        return {"label_selector": ""} if resource == "pods" else {}

    async def _hold(self, resource: str, stop: asyncio.Event, after: tuple[str, ...] | None = None) -> None:
        """Wait until the first list of every resource in `after` (None: every other one) that this
        bridge watches is in the stream (or `stop`)."""
        loop = asyncio.get_running_loop()
        since = loop.time()
        while not stop.is_set():
            missing = [r for r in self.resources if r != resource and (after is None or r in after)
                       and not self.listed[r].is_set()]
            if not missing:
                return
            waits = [asyncio.ensure_future(e.wait()) for e in (stop, *(self.listed[r] for r in missing))]
            try:
                done, _ = await asyncio.wait(waits, timeout=HOLD_WARNING, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            if not done:
                errors = [f"{r}: {w.last_error}" for r in missing if (w := self.watchers.get(r)) and w.last_error]
                log.warning("bridge: %s held back %.0fs: waiting for the first list of %s%s", resource,
                            loop.time() - since, ", ".join(missing), f" ({'; '.join(errors)})" if errors else "")

    async def _save(self, kv: Any, key: str, watcher: ResourceWatcher) -> str | None:
        """Store the watcher's position: each known object trimmed to its metadata (`trim`), encoded once
        for as long as the watcher holds that same object (an event replaces it), so a save of 1,000
        pods of which a few changed encodes a few."""
        memo = self._trimmed.setdefault(key, {})
        kept: dict[str, tuple[dict, msgspec.Raw]] = {}
        for uid, obj in watcher.known.items():
            hit = memo.get(uid)
            kept[uid] = hit if hit is not None and hit[0] is obj else (obj, msgspec.Raw(_enc.encode(trim(obj))))
        self._trimmed[key] = kept
        rv = watcher.resource_version
        await kv.put(key, positions.encode({"resourceVersion": rv, "known": {uid: raw for uid, (_, raw) in kept.items()}}))
        return rv
