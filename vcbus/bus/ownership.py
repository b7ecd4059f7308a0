"""One decider per partition, enforced: a pinned consumer and a live owner that answers.

Two deciders folding the same records would both publish (their outputs
dedupe) and race each other's acks. Two mechanisms keep it to one:

1. **The server pins one client** (ADR-42). The decider's durable consumer
   has the priority group `vcbus` with `priority_policy: pinned_client`: the
   server delivers records to one puller only; any other puller's requests
   wait unserved, and a decider whose pin moved away gets status 423 on its
   next request (`vcbus.bus.pulling.PinLost`) and stops.
2. **The owner answers** on `vcbus.ctl.decider.<consumer>` (core NATS, no
   stream). A decider about to start asks there first: an answer means a
   live decider owns the partition, and the newcomer is refused
   (`PartitionOwned`, exit code 4). No responder means the previous owner is
   gone: a killed process's subscription goes with its connection at once.
   The newcomer then clears a pin the dead owner may have left (`UNPIN`, so a
   restart does not wait for the pin's timeout), subscribes there itself and
   starts pulling.

If two deciders start within the same instant, both pass step 2; the server
then pins only one of them (step 1) and the other waits as a standby that
decides nothing until the pin is released.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time

import nats.errors
from nats.aio.client import Client

from vcbus.errors import UserError

GROUP = "vcbus"
CONTROL_PREFIX = "vcbus.ctl.decider"
PIN_TIMEOUT = 30.0  # seconds without a pull request before the server unpins a decider


class PartitionOwned(UserError):
    """A live decider already owns this partition."""

    exit_code = 4


def control_subject(consumer: str) -> str:
    return f"{CONTROL_PREFIX}.{consumer}"


class Ownership:
    """The owner's answering subscription for one consumer (partition)."""

    def __init__(self, nc: Client, stream: str, consumer: str, *, partition: str) -> None:
        self.nc = nc
        self.stream = stream
        self.consumer = consumer
        self.partition = partition
        self._sub = None
        self.info = {
            "consumer": consumer,
            "partition": partition,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    async def claim(self, *, wait: float = 1.0) -> None:
        """Refuse (`PartitionOwned`) if a live decider answers; else become the owner."""
        subject = control_subject(self.consumer)
        try:
            reply = await self.nc.request(subject, b"", timeout=wait)
        except nats.errors.NoRespondersError:
            reply = None
        except (nats.errors.TimeoutError, asyncio.TimeoutError):
            raise PartitionOwned(
                f"partition {self.partition} ({self.stream} consumer {self.consumer}) has an owner that does not "
                f"answer within {wait:g}s; refusing to start a second decider"
            ) from None
        if reply is not None:
            try:
                who = json.loads(reply.data)
                where = f"pid {who.get('pid')} on {who.get('host')} since {who.get('since')}"
            except (ValueError, AttributeError):
                where = "another process"
            raise PartitionOwned(
                f"partition {self.partition} is owned by a running decider ({where}); "
                f"one decider per partition: stop it first"
            )
        self._sub = await self.nc.subscribe(subject, cb=self._answer)
        await self.nc.flush()
        await self.unpin()

    async def _answer(self, msg) -> None:
        if msg.reply:
            await self.nc.publish(msg.reply, json.dumps(self.info).encode())

    async def unpin(self) -> None:
        """Clear a pin left by a previous (dead) owner; nothing to do when there is none."""
        try:
            await self.nc.request(
                f"$JS.API.CONSUMER.UNPIN.{self.stream}.{self.consumer}",
                json.dumps({"group": GROUP}).encode(),
                timeout=5,
            )
        except Exception:  # older servers have no UNPIN: the pin then times out by itself
            pass

    async def release(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except Exception:  # the connection may be gone already
                pass
