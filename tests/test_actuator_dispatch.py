"""The actuator's dispatch: one explicit table from command type to the method that carries it out.

`vcbus.k8s.actuator.HANDLERS` maps every command the state machines emit
(`statemachines.outputs.COMMANDS`) to its `Actuator` method. A command type
the table lacks is only dropped and logged at run time, so the table is
checked here against the contract, both ways. Nothing here talks to an API
server: the table is read, and a dropped command never reaches one.
"""

from __future__ import annotations

import logging

from kubernetes import client

from statemachines import outputs as o
from vcbus.k8s.actuator import HANDLERS, Actuator


def test_every_command_type_has_a_handler_and_the_table_holds_nothing_else():
    missing = [c.__name__ for c in o.COMMANDS if c not in HANDLERS]
    extra = [c.__name__ for c in HANDLERS if c not in o.COMMANDS]
    assert not missing, f"commands the actuator would drop: {missing}"
    assert not extra, f"handlers for types that are not commands: {extra}"


def test_each_command_is_carried_out_by_its_own_method_of_the_actuator():
    for command, handler in HANDLERS.items():
        assert handler is getattr(Actuator, f"_{command.__name__}"), (command.__name__, handler.__qualname__)


def test_an_output_that_is_not_a_command_is_dropped_logged_and_counted(caplog):
    actuator = Actuator(client.ApiClient())  # no call is made: the type has no handler
    caplog.set_level(logging.WARNING, logger="vcbus.actuator")
    event = o.PhaseChanged(job="default/j", seq=7, from_phase="Pending", to_phase="Running")
    assert actuator.apply(event) == "dropped"
    assert (actuator.dropped, actuator.applied) == (1, 0)
    assert "PhaseChanged for default/j dropped" in caplog.text
