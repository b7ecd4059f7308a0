"""Command records (§3.3): `vcctl job suspend/resume/...` as a request for the job.

A bus.volcano.sh Command that targets a vcjob is consumed once (its uid
remembered), deleted (`DeleteBusCommand`), announced (`CommandIssued`, when
the job is known) and handled as a CommandIssued request with its action.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.model.objects import Command
from statemachines.model.vocabulary import Event
from statemachines.policies import Request
from statemachines.worker import handle


def on_command(engine: Any, rtype: str, cmd: Command) -> None:
    target = cmd.target
    if rtype != "ADDED" or target is None:
        return
    if target.api_version != "batch.volcano.sh/v1alpha1" or target.kind != "Job":
        return
    entry = engine.entry(cmd.metadata.namespace, target.name)
    if cmd.metadata.uid and cmd.metadata.uid in entry.consumed:
        return
    entry.consumed.add(cmd.metadata.uid)
    engine.emit(o.DeleteBusCommand, entry, name=cmd.metadata.name, namespace=cmd.metadata.namespace)
    if entry.job is not None:  # recordJobEvent: no job in the cache, no event
        engine.emit(
            o.RecordEvent,
            entry,
            reason="CommandIssued",
            message=f"Start to execute command {cmd.action}, and clean it up to make sure executed not more than once.",
        )
    handle(engine, entry, Request(event=Event.COMMAND_ISSUED, action=cmd.action, source="command"))
