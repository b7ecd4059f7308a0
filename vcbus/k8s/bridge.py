"""The watch bridge: Kubernetes watch events into VCBUS_K8S, resumable.

One `ResourceWatcher` (vcbus.k8s.watching: list-then-watch, bookmarks, relist
on 410 Gone with DELETED for what vanished, backoff on errors) per resource
the controller reads: vcjobs, pods labelled `volcano.sh/job-name`, podgroups,
queues and commands. Each event becomes a watch record stamped with the time
the bridge observed it (`"time"`, the event time the state machines use) and
is published with its dedup id `<uid>:<resourceVersion>:<type>`.

Resume: after the publishes of a batch are acknowledged, the watcher's
position (resourceVersion, and the objects it knows, trimmed to apiVersion,
kind and metadata — enough to publish a DELETED for an object that vanished
while the bridge was away) is stored in the KV bucket `vcbus_bridge`, one key
per resource. A restarted bridge resumes from there: it repeats nothing it had
stored (and JetStream drops what it had published but not yet stored).
Nodes are not watched: no decision of the job controller reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from typing import Any

import msgspec
from nats.js.errors import KeyNotFoundError

from statemachines.records import decode
from vcbus.bus.publisher import Publisher, prepare
from vcbus.k8s.watching import ResourceWatcher

log = logging.getLogger("vcbus.bridge")

RESOURCES = ("vcjobs", "pods", "podgroups", "queues", "commands")
BRIDGE_BUCKET = "vcbus_bridge"
_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder()


def observed_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def trim(obj: dict) -> dict:
    """What a DELETED record needs of an object: its identity and metadata."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("managedFields", None)
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": meta}


class Bridge:
    def __init__(
        self,
        js: Any,
        api_client: Any,
        *,
        namespace: str | None = None,
        resources: tuple[str, ...] = RESOURCES,
        batch: int = 64,
        idle_flush: float = 0.05,
    ) -> None:
        self.js = js
        self.api = api_client
        self.namespace = namespace
        self.resources = resources
        self.batch = batch
        self.idle_flush = idle_flush
        self.published = 0
        self.watchers: dict[str, ResourceWatcher] = {}

    async def _kv(self):
        try:
            return await self.js.key_value(BRIDGE_BUCKET)
        except Exception:
            return await self.js.create_key_value(bucket=BRIDGE_BUCKET, history=1)

    async def run(self, stop: asyncio.Event) -> None:
        kv = await self._kv()
        tasks = [asyncio.create_task(self._run_one(kv, r, stop), name=f"bridge-{r}") for r in self.resources]
        try:
            await stop.wait()
        finally:
            for w in self.watchers.values():
                w.stop(timeout=2.0)
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    async def _run_one(self, kv: Any, resource: str, stop: asyncio.Event) -> None:
        snapshot = None
        with contextlib.suppress(KeyNotFoundError):
            entry = await kv.get(resource)
            snapshot = _dec.decode(entry.value) if entry.value else None
        if snapshot:
            watcher = ResourceWatcher.from_snapshot(self.api, resource, snapshot, namespace=self.namespace)
        else:
            watcher = ResourceWatcher(self.api, resource, namespace=self.namespace)
        self.watchers[resource] = watcher
        watcher.start()
        publisher = Publisher(self.js)
        pending = 0
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            try:
                event = await loop.run_in_executor(None, watcher.next_event, self.idle_flush)
            except TimeoutError:
                event = None
            except EOFError:
                return
            if event is not None:
                record = {"type": event["type"], "object": event["object"], "time": observed_now()}
                data = _enc.encode(record)
                msg = prepare(data, decode(data))
                if msg is not None:
                    await publisher.publish(msg)
                    pending += 1
            if pending and (event is None or pending >= self.batch):
                await publisher.flush()
                self.published += pending
                pending = 0
                snap = watcher.snapshot()
                snap["known"] = {uid: trim(obj) for uid, obj in snap["known"].items()}
                await kv.put(resource, _enc.encode(snap))
