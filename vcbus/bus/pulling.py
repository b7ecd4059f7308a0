"""A pull consumer's records as soon as they are stored, taken in whatever batch is there.

nats-py's `fetch(n, timeout)` asks for records, then waits until `n` came or
the timeout ran out: at light load a single record waits for the timeout.
`Puller` instead keeps pull requests open ahead of need (`batch` records,
each request expiring after `expires`, with idle heartbeats), so the server
delivers a record the moment it is stored; `take(n, timeout)` waits for the
first record only and returns it with whatever else has arrived meanwhile. No
batch timer: a lone record is handled alone, a burst in batches.

Priority group (ADR-42). With `group`, every pull request names the group.
On a consumer with `priority_policy: pinned_client` the server delivers to one
client only (the *pinned* one; its deliveries carry `Nats-Pin-Id`, which the
client repeats in its requests); the others' requests wait as standbys. A
`423` status (the pin moved to another client: another decider took the
partition over) raises `PinLost`, which stops the decider (exit code 4).
"""

from __future__ import annotations

import asyncio
import collections
import json
import time

from nats.aio.client import Client
from nats.aio.msg import Msg

from vcbus.bus.errors import BusError
from vcbus.bus.ownership import PartitionOwned

PIN_ID = "Nats-Pin-Id"
PENDING = "Nats-Pending-Messages"


class PinLost(PartitionOwned):
    """Another client holds this consumer's pin now: this one must stop deciding (not retried)."""


class Puller:
    def __init__(
        self,
        nc: Client,
        stream: str,
        consumer: str,
        *,
        batch: int = 256,
        expires: float = 10.0,
        heartbeat: float = 2.0,
        group: str | None = None,
        arrived: asyncio.Event | None = None,
    ) -> None:
        self.nc = nc
        self.subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self.batch = batch
        self.expires = expires
        self.heartbeat = heartbeat
        self.group = group
        self.pin: str | None = None
        self._inbox = ""
        self._sub = None
        self._queue: collections.deque[Msg] = collections.deque()
        self._arrived = arrived or asyncio.Event()  # shared when a `Merger` waits on two pullers
        self._outstanding = 0  # records requested and not delivered (nor expired)
        self._last_activity = 0.0
        self._error: BaseException | None = None
        self._poked = False

    async def start(self) -> None:
        self._inbox = self.nc.new_inbox()
        self._sub = await self.nc.subscribe(self._inbox, cb=self._on_msg)
        await self._top_up()

    async def close(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception:  # the connection may be gone already
                pass

    async def _on_msg(self, msg: Msg) -> None:
        self._last_activity = time.monotonic()
        status = (msg.headers or {}).get("Status") if not msg.data else None
        if status:
            if status == "100":  # idle heartbeat (or flow control): the requests are alive
                return
            if status == "423":
                self._error = PinLost(
                    f"{self.subject}: the consumer's pin moved to another client (another decider took the "
                    f"partition over); stopping"
                )
            elif status in ("408", "409", "404"):
                pending = (msg.headers or {}).get(PENDING)
                if pending and pending.isdigit():
                    self._outstanding = max(0, self._outstanding - int(pending))
                else:
                    self._outstanding = 0
                desc = (msg.headers or {}).get("Description") or ""
                if status == "409" and "Consumer Deleted" in desc:
                    self._error = BusError(f"{self.subject}: {desc}")
            else:
                desc = (msg.headers or {}).get("Description") or ""
                self._error = BusError(f"{self.subject}: status {status} {desc}".strip())
            self._arrived.set()
            return
        self._outstanding = max(0, self._outstanding - 1)
        if self.group is not None and msg.headers:
            pin = msg.headers.get(PIN_ID)
            if pin:
                self.pin = pin
        self._queue.append(msg)
        self._arrived.set()

    async def _top_up(self) -> None:
        if self._outstanding > self.batch // 2:
            return
        request: dict = {
            "batch": self.batch,
            "expires": int(self.expires * 1e9),
            "idle_heartbeat": int(self.heartbeat * 1e9),
        }
        if self.group is not None:
            request["group"] = self.group
            if self.pin:
                request["id"] = self.pin
        await self.nc.publish(self.subject, json.dumps(request).encode(), reply=self._inbox)
        self._outstanding += self.batch
        self._last_activity = time.monotonic()

    def poke(self) -> None:
        """Make a waiting `take` return now (empty-handed if no record came)."""
        self._poked = True
        self._arrived.set()

    @property
    def queue(self) -> collections.deque[Msg]:
        """The records delivered and not taken yet, in delivery order."""
        return self._queue

    async def keep_up(self) -> None:
        """Raise what the server reported; ask again if the requests were lost (a reconnect);
        keep enough requests open."""
        self._raise()
        if time.monotonic() - self._last_activity > self.expires + 2 * self.heartbeat:
            self._outstanding = 0  # requests lost (a reconnect): ask again
        await self._top_up()

    async def take(self, n: int, timeout: float) -> list[Msg]:
        """Up to `n` records: waits at most `timeout` for the first, never for more; returns
        early with none when `poke`d."""
        deadline = time.monotonic() + timeout
        while not self._queue:
            self._raise()
            if self._poked:
                self._poked = False
                return []
            await self.keep_up()
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            self._arrived.clear()
            if self._queue:
                break
            try:
                await asyncio.wait_for(self._arrived.wait(), min(left, self.heartbeat))
            except asyncio.TimeoutError:
                pass
        out = []
        while self._queue and len(out) < n:
            out.append(self._queue.popleft())
        await self._top_up()
        return out

    def _raise(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err
