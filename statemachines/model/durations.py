"""Go's `time.ParseDuration`, exactly: the one duration parser of admission and the engine.

A vcjob's lifecycle-policy `timeout` is a `metav1.Duration`; Kubernetes decodes it
with Go's `time.ParseDuration`. Volcano's webhook therefore refuses what that
function refuses, and its controller could never hold such a job. vcbus parses
every duration it reads from an object with `parse_go_duration`, so that what the
webhook (`statemachines.admission`) admits is exactly what the engine can use:

- the grammar `[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+`, or `0` alone; `""` is invalid;
- units `ns`, `us`, `µs` (U+00B5), `μs` (U+03BC), `ms`, `s`, `m`, `h`;
- the result is an int64 count of nanoseconds: anything beyond ±2^63 ns
  (about 292 years, e.g. `99999999999h`) is an error, not a wrap-around;
- fractions are cut (not rounded) to whole nanoseconds, as Go does;
- the error texts are Go's: `time: invalid duration "soon"`,
  `time: missing unit in duration "10"`, `time: unknown unit "d" in duration "1d"`,
  with Go's quoting of control and non-ASCII bytes (`\\xNN`).
"""

from __future__ import annotations

NANOSECOND = 1
_UNITS = {
    "ns": NANOSECOND,
    "us": 1_000,
    "\u00b5s": 1_000,  # U+00B5 micro sign
    "\u03bcs": 1_000,  # U+03BC Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_LIMIT = 1 << 63  # |negative| may reach it; positive stops one below
_DIGITS = "0123456789"


class DurationError(ValueError):
    """A duration Go's `time.ParseDuration` refuses; the message is Go's."""


def go_quote(text: str) -> str:
    """The `time` package's `quote`: printable ASCII as is, every other byte as `\\xNN`."""
    out = ['"']
    for char in text:
        if char < " " or ord(char) >= 0x80:
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            out.append("\\" + char if char in '"\\' else char)
    out.append('"')
    return "".join(out)


def _invalid(orig: str) -> DurationError:
    return DurationError("time: invalid duration " + go_quote(orig))


def _leading_int(s: str, orig: str) -> tuple[int, str]:
    i, x = 0, 0
    while i < len(s) and s[i] in _DIGITS:
        if x > _LIMIT // 10:
            raise _invalid(orig)
        x = x * 10 + ord(s[i]) - 48
        if x > _LIMIT:
            raise _invalid(orig)
        i += 1
    return x, s[i:]


def _leading_fraction(s: str) -> tuple[int, int, str]:
    """Digits after the point: their value, 10**(digits kept), the rest (overflowing digits dropped)."""
    i, x, scale, overflow = 0, 0, 1, False
    while i < len(s) and s[i] in _DIGITS:
        if not overflow:
            if x > (_LIMIT - 1) // 10:
                overflow = True
            else:
                y = x * 10 + ord(s[i]) - 48
                if y > _LIMIT:
                    overflow = True
                else:
                    x, scale = y, scale * 10
        i += 1
    return x, scale, s[i:]


def parse_go_duration(text: str) -> int:
    """Nanoseconds of `text`, as Go's `time.ParseDuration` (see the module docstring).

    Raises:
        DurationError: (a ValueError) with Go's message.
    """
    if not isinstance(text, str):
        raise DurationError(f"time: invalid duration {text!r}: not a string")
    orig, s, neg = text, text, False
    if s and s[0] in "-+":
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise _invalid(orig)
    total = 0
    while s:
        if not (s[0] == "." or s[0] in _DIGITS):
            raise _invalid(orig)
        before = len(s)
        whole, s = _leading_int(s, orig)
        pre = before != len(s)
        frac, scale, post = 0, 1, False
        if s and s[0] == ".":
            s = s[1:]
            before = len(s)
            frac, scale, s = _leading_fraction(s)
            post = before != len(s)
        if not pre and not post:
            raise _invalid(orig)
        i = 0
        while i < len(s) and not (s[i] == "." or s[i] in _DIGITS):
            i += 1
        if i == 0:
            raise DurationError("time: missing unit in duration " + go_quote(orig))
        unit_text, s = s[:i], s[i:]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise DurationError(f"time: unknown unit {go_quote(unit_text)} in duration {go_quote(orig)}")
        if whole > _LIMIT // unit:
            raise _invalid(orig)
        whole *= unit
        if frac > 0:
            whole += int(float(frac) * (float(unit) / float(scale)))  # Go's float64 arithmetic
            if whole > _LIMIT:
                raise _invalid(orig)
        total += whole
        if total > _LIMIT:
            raise _invalid(orig)
    if neg:
        return -total
    if total > _LIMIT - 1:
        raise _invalid(orig)
    return total


def duration_seconds(text: str) -> float:
    """Seconds of a Go duration string (`parse_go_duration` / 1e9)."""
    return parse_go_duration(text) / 1e9
