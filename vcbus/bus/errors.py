"""Bus failures, as `UserError`s the CLI prints without a traceback.

`BusError` is the base: the server or a stream is not usable (exit code 3, so
scripts can tell "the bus is down" from "your input is bad", exit code 2).
"""

from __future__ import annotations

from vcbus import exitcodes
from vcbus.errors import UserError


class BusError(UserError):
    """The bus cannot be used: no server, a failed publish, a stream with an unexpected shape."""

    exit_code = exitcodes.BUS


class ServerError(BusError):
    """The embedded nats-server could not be started (missing binary, port taken, bad store)."""

    def __init__(self, message: str, *, log: list[str] | None = None, exit_code: int | None = None) -> None:
        super().__init__(message, exit_code=exit_code)
        self.log = log or []
