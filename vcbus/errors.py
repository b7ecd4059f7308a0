"""Errors the CLI turns into a clear message and an exit code, never a traceback.

Every adapter raises `UserError` (or a subclass) for bad input or a missing
dependency; `vcbus.cli.main` prints `error: <message>` and exits with the
error's `exit_code` (2 for unusable input, as the issues ask).
"""

from __future__ import annotations

from vcbus import exitcodes


class UserError(Exception):
    """Something the user can fix: bad input, a missing binary, a taken port."""

    exit_code = exitcodes.USAGE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
