"""Go's `time.Parse(time.RFC3339, s)`, as metav1.Time decodes `creationTimestamp` and friends.

`rfc3339_error(text)` is "" for a time Go accepts, else Go's `*time.ParseError`
text, e.g. `parsing time "soon" as "2006-01-02T15:04:05Z07:00": cannot parse
"soon" as "2006"` or `parsing time "2026-13-30T08:00:00Z": month out of range`.
It follows the general parser (`time.parse`) for the one layout: a one-digit
hour is accepted, fractional seconds after the seconds are accepted (more than
nine digits truncated), a zone offset hour up to 24 and minute up to 60, and
the day is checked against the month last. Checked against a real
kube-apiserver in tests/test_validate_strict.py.
"""

from __future__ import annotations

LAYOUT = "2006-01-02T15:04:05Z07:00"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _digit(text: str, i: int) -> bool:
    return len(text) > i and "0" <= text[i] <= "9"


def _getnum(text: str, fixed: bool) -> tuple[int, str] | None:
    """Go's getnum: one or two digits (exactly two when `fixed`), or None."""
    if not _digit(text, 0):
        return None
    if not _digit(text, 1):
        return None if fixed else (int(text[0]), text[1:])
    return int(text[:2]), text[2:]


def _days_in(month: int, year: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


class _Bad(Exception):
    def __init__(self, elem: str, value: str, message: str = "") -> None:
        super().__init__(message)
        self.elem, self.value, self.message = elem, value, message


def _number(value: str, elem: str, fixed: bool, low: int, high: int, what: str) -> tuple[int, str]:
    got = _getnum(value, fixed)
    if got is None:
        raise _Bad(elem, value)
    if not low <= got[0] < high:
        raise _Bad(elem, got[1], f": {what} out of range")
    return got


def _literal(value: str, char: str) -> str:
    if not value or value[0] != char:
        raise _Bad(char, value)
    return value[1:]


def _seconds(value: str) -> str:
    _, value = _number(value, "05", True, 0, 60, "second")
    if len(value) >= 2 and value[0] in ".," and _digit(value, 1):
        n = 2
        while _digit(value, n):
            n += 1
        value = value[n:]
    return value


def _zone(value: str) -> str:
    if value[:1] == "Z":
        return value[1:]
    if len(value) < 6 or value[3] != ":":
        raise _Bad("Z07:00", value)
    hours, minutes = _getnum(value[1:3], True), _getnum(value[4:6], True)
    if hours is None or minutes is None:
        raise _Bad("Z07:00", value)
    if minutes[0] > 60:  # Go sets the range error minute last, so it wins
        raise _Bad("Z07:00", value[6:], ": time zone offset minute out of range")
    if hours[0] > 24:
        raise _Bad("Z07:00", value[6:], ": time zone offset hour out of range")
    if value[0] not in "+-":
        raise _Bad("Z07:00", value)
    return value[6:]


def rfc3339_error(text: str) -> str:
    """"" when Go's `time.Parse(time.RFC3339, text)` accepts `text`, else its error text."""
    value = text
    try:
        if len(value) < 4 or not all("0" <= c <= "9" for c in value[:4]):
            raise _Bad("2006", value)
        year, value = int(value[:4]), value[4:]
        month, value = _number(_literal(value, "-"), "01", True, 1, 13, "month")
        day_value = _literal(value, "-")
        day, value = _number(day_value, "02", True, 0, 100, "day")
        hour_value = _literal(value, "T")
        _, value = _number(hour_value, "15", False, 0, 24, "hour")
        _, value = _number(_literal(value, ":"), "04", True, 0, 60, "minute")
        value = _zone(_seconds(_literal(value, ":")))
        if value:
            raise _Bad("", value, f": extra text: {_quote(value)}")
        if not 1 <= day <= _days_in(month, year):
            raise _Bad("", value, ": day out of range")
    except _Bad as bad:
        if bad.message:
            return f"parsing time {_quote(text)}{bad.message}"
        return f"parsing time {_quote(text)} as {_quote(LAYOUT)}: cannot parse {_quote(bad.value)} as {_quote(bad.elem)}"
    return ""
