"""The actuator service: VCBUS_CMDS in order, each command applied, then acked.

A durable pull consumer (`vcbus-actuator`, explicit acks, one message in
flight) reads the commands in stream order; each is applied by
`vcbus.k8s.actuator.Actuator` in a worker thread (the `kubernetes` client is
synchronous) and acknowledged only afterwards. A crash between apply and ack
redelivers the command, which the actuator applies idempotently. A command
that fails (API server down, a webhook refusing) is retried with backoff
before anything after it: commands of one job must happen in order.

Commands carry `Nats-Msg-Id` `<K8S seq>:<index>` (the scheduler's
`sched:<seq>:<session>:<index>`); it names Kubernetes Events deterministically,
so a redelivered RecordEvent creates nothing new.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec
import nats.errors
from nats.js import api

from statemachines import outputs as o
from vcbus.bus import subjects as s
from vcbus.k8s.actuator import Actuator

log = logging.getLogger("vcbus.actuator")
DURABLE = "vcbus-actuator"


def _msg_id(msg: Any) -> str:
    return (msg.headers or {}).get("Nats-Msg-Id", "")


def _index(msg: Any) -> int:
    _, _, index = _msg_id(msg).rpartition(":")
    return int(index) if index.isdigit() else 0


class ActuatorService:
    def __init__(self, bus: Any, api_client: Any, *, idle: float = 0.25, max_backoff: float = 10.0) -> None:
        self.bus = bus
        self.actuator = Actuator(api_client)
        self.idle = idle
        self.max_backoff = max_backoff
        self.results: dict[str, int] = {"applied": 0, "done": 0, "dropped": 0, "failed": 0}
        self.ready = asyncio.Event()

    async def _consumer(self) -> None:
        cfg = api.ConsumerConfig(
            durable_name=DURABLE,
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            max_ack_pending=1,
            ack_wait=5.0,  # a command left unacked by a crash comes back after this; applies take far less
            max_deliver=-1,
        )
        try:
            await self.bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
        except Exception:
            await self.bus.js.add_consumer(s.CMDS_STREAM, config=cfg)

    async def run(self, *, stop: asyncio.Event, until_idle: bool = False) -> None:
        await self._consumer()
        sub = await self.bus.js.pull_subscribe_bind(durable=DURABLE, stream=s.CMDS_STREAM)
        self.ready.set()
        try:
            while not stop.is_set():
                try:
                    msgs = await sub.fetch(1, timeout=self.idle)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    if until_idle:
                        return
                    continue
                for msg in msgs:
                    await self._handle(msg, stop)
        finally:
            try:
                await sub.unsubscribe()
            except Exception:
                pass

    async def _handle(self, msg: Any, stop: asyncio.Event) -> None:
        try:
            cmd = o.command_decoder.decode(msg.data)
        except msgspec.DecodeError as err:
            log.warning("actuator: command seq %s is not readable, skipped: %s", msg.metadata.sequence.stream, err)
            await msg.ack()
            return
        index = _index(msg)
        delay = 0.2
        while True:
            try:
                result = await asyncio.to_thread(self.actuator.apply, cmd, index=index, msg_id=_msg_id(msg))
                break
            except Exception as err:  # the API server refused or is away: retry, in order
                self.results["failed"] += 1
                log.warning("actuator: %s for %s failed (%s); retrying in %.1fs", type(cmd).__name__, cmd.job, err, delay)
                if stop.is_set():
                    return  # not acked: redelivered to the next run
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_backoff)
                await msg.in_progress()
        self.results[result] = self.results.get(result, 0) + 1
        await msg.ack_sync()
