"""Time as the domain sees it: RFC 3339 strings that come inside events.

The state machines never read a clock. Every record carries (or implies) the
time it happened; these helpers parse, format and compare such times and
format Go durations the way Kubernetes serialises `metav1.Duration`.
Timestamps are kept as Kubernetes writes them, `YYYY-MM-DDTHH:MM:SSZ`, so that
two of them compare correctly as strings.
"""

from __future__ import annotations

import datetime as _dt
import re

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
ZERO_TIME = "1970-01-01T00:00:00Z"


def parse(ts: str) -> int:
    """Seconds since the epoch of an RFC 3339 timestamp (fractions dropped)."""
    t = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00") if ts.endswith("Z") else ts)
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return int((t - _EPOCH).total_seconds() // 1)


def fmt(seconds: int) -> str:
    """Kubernetes' timestamp form of seconds since the epoch."""
    return (_EPOCH + _dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize(ts: str) -> str:
    """Any RFC 3339 timestamp as `YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds)."""
    if len(ts) == 20 and ts[-1] == "Z" and ts[10] == "T":
        return ts
    return fmt(parse(ts))


_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds of a Go duration string such as `1m30s` or `500ms`."""
    if text in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    for m in _GO_DURATION.finditer(body):
        if m.start() != pos:
            raise ValueError(f"invalid duration {text!r}")
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(body) or pos == 0:
        raise ValueError(f"invalid duration {text!r}")
    return sign * total


def go_duration(seconds: float) -> str:
    """Format seconds as Go's `time.Duration.String()` does (`1h2m3s`, `0s`, `1.5s`)."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 1:
        ms = seconds * 1000
        return f"{sign}{ms:g}ms" if ms >= 1 else f"{sign}{seconds * 1e6:g}µs"
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    s_text = f"{s:.9f}".rstrip("0").rstrip(".") + "s"
    if h:
        return f"{sign}{int(h)}h{int(m)}m{s_text}"
    if m:
        return f"{sign}{int(m)}m{s_text}"
    return f"{sign}{s_text}"


def add(ts: str, seconds: float) -> str:
    """`ts` plus `seconds`, rounded up to whole seconds (a timer never fires early)."""
    whole = int(seconds) if seconds == int(seconds) else int(seconds) + 1
    return fmt(parse(ts) + whole)
