"""One log format for every vcbus service: stdlib `logging`, levels, text or JSON lines.

`configure(verbosity, fmt)` is the only place a handler is installed. Every
long-running command (`vcbus up`, `vcbus scheduler`, `vcbus webhook`) calls it
with its `-v/-q` and `--log-format` flags; the global `vcbus --log-format`
(or `VCBUS_LOG_FORMAT`) sets the default.

- text: `2026-11-30T16:20:00.123Z INFO  vcbus.decider: message`
- json: one object per line, `{"ts", "level", "logger", "msg"}` plus the
  `extra=` fields of the call and `exc` with the traceback of an exception.

The records of the `kubernetes` client and of nats-py go through the same
handler (at WARNING unless -vv), so nothing prints in another format.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
from typing import Any, TextIO

FORMATS = ("text", "json")
ENV = "VCBUS_LOG_FORMAT"
# The attributes every LogRecord has; anything else came from `extra=` and is logged as a field.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def _timestamp(record: logging.LogRecord) -> str:
    t = dt.datetime.fromtimestamp(record.created, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class TextFormatter(logging.Formatter):
    """`<UTC time> <LEVEL> <logger>: <message> [k=v ...]`, the traceback on the following lines."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname:<5} {record.name}: {record.getMessage()}"
        extras = _extras(record)
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, the extra fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _extras(record).items():
            doc.setdefault(key, value)
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def default_format() -> str:
    fmt = os.environ.get(ENV, "text") or "text"
    return fmt if fmt in FORMATS else "text"


def configure(verbosity: int = 0, fmt: str | None = None, *, stream: TextIO | None = None) -> logging.Handler:
    """Install the one handler: INFO by default, DEBUG with -vv (verbosity > 1), WARNING when quiet (< 0)."""
    fmt = fmt or default_format()
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r}: expected text or json")
    level = logging.DEBUG if verbosity > 1 else logging.INFO if verbosity >= 0 else logging.WARNING
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler._vcbus = True  # type: ignore[attr-defined] - ours, replaced by the next configure()
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if not getattr(h, "_vcbus", False)] + [handler]
    root.setLevel(logging.WARNING if verbosity <= 1 else logging.DEBUG)  # libraries: warnings unless -vv
    own = logging.getLogger("vcbus")
    own.handlers[:] = []
    own.propagate = True
    own.setLevel(level)
    return handler
