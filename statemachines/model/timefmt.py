"""Time as the domain sees it: RFC 3339 strings that come inside events.

The state machines never read a clock. Every record carries (or implies) the
time it happened; these helpers parse, format and compare such times and
format Go durations the way Kubernetes serialises `metav1.Duration`.
Timestamps are kept as Kubernetes writes them, `YYYY-MM-DDTHH:MM:SSZ`, so that
two of them compare correctly as strings.
"""

from __future__ import annotations

import datetime as _dt

from statemachines.model.durations import duration_seconds

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
ZERO_TIME = "1970-01-01T00:00:00Z"


_parsed: dict[str, int] = {}  # timestamps repeat a lot in a log: each is parsed once (bounded)


def parse(ts: str) -> int:
    """Seconds since the epoch of an RFC 3339 timestamp (fractions dropped)."""
    seconds = _parsed.get(ts)
    if seconds is not None:
        return seconds
    t = _dt.datetime.fromisoformat(ts.replace("Z", "+00:00") if ts.endswith("Z") else ts)
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    seconds = int((t - _EPOCH).total_seconds() // 1)
    if len(_parsed) >= 65536:
        _parsed.clear()
    _parsed[ts] = seconds
    return seconds


def fmt(seconds: int) -> str:
    """Kubernetes' timestamp form of seconds since the epoch."""
    return (_EPOCH + _dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize(ts: str) -> str:
    """Any RFC 3339 timestamp as `YYYY-MM-DDTHH:MM:SSZ` (UTC, whole seconds)."""
    if len(ts) == 20 and ts[-1] == "Z" and ts[10] == "T":
        return ts
    return fmt(parse(ts))


def parse_duration(text: str) -> float:
    """Seconds of a Go duration string such as `1m30s` or `500ms`: Go's `time.ParseDuration`.

    The one parser of admission and engine (`statemachines.model.durations`): `soon`,
    `""` and `99999999999h` (beyond int64 nanoseconds) raise DurationError, a ValueError.
    """
    return duration_seconds(text)


_durations: dict[float, str] = {}  # a log's running durations repeat: each is formatted once (bounded)


def go_duration(seconds: float) -> str:
    """Format seconds as Go's `time.Duration.String()` does (`1h2m3s`, `0s`, `1.5s`)."""
    text = _durations.get(seconds)
    if text is None:
        text = _go_duration(seconds)
        if len(_durations) >= 4096:
            _durations.clear()
        _durations[seconds] = text
    return text


def _go_duration(seconds: float) -> str:
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
