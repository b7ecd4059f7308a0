"""Go `flag` parsing for plugin arguments (`spec.plugins.<name>: [args...]`).

Volcano parses each plugin's argument list with a Go `flag.FlagSet` in mode
ContinueOnError. Python's argparse differs (abbreviations, boolean values,
where parsing stops), so this module re-implements the Go rules:

- `-name=value` and `--name=value` are the same; a non-boolean `-name value`
  consumes the next element even if it starts with `-`;
- a boolean `-name` means true, `-name=false` false; `-name false` is true and
  the bare `false` then ends parsing;
- parsing stops at the first element that does not start with `-`, at `-`,
  `""`, and after `--` (which is consumed);
- integers use Go's base auto-detection (`0x`, `0o`, `0b`, a leading `0` is
  octal; `_` only between digits or after a base prefix);
- on an error, flags parsed before it keep their values and the rest keep
  their defaults. The error is returned as text (upstream only logs it).
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping, Sequence
from typing import Literal

import msgspec

FlagType = Literal["string", "bool", "int"]


class Flag(msgspec.Struct, frozen=True):
    """One flag of a plugin's flag set."""

    name: str
    type: FlagType
    default: str | bool | int
    help: str = ""


class ParsedArgs(msgspec.Struct, frozen=True):
    """The values after parsing, plus the parse error (if any) and the arguments left over."""

    values: dict[str, str | bool | int]
    error: str = ""
    rest: tuple[str, ...] = ()

    def str(self, name: str) -> str:
        value = self.values[name]
        assert isinstance(value, str)
        return value

    def bool(self, name: builtins.str) -> builtins.bool:  # builtins.: the methods str/bool/int shadow them here
        value = self.values[name]
        assert isinstance(value, bool)
        return value

    def int(self, name: builtins.str) -> builtins.int:
        value = self.values[name]
        assert isinstance(value, int) and not isinstance(value, bool)
        return value


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def go_quote(value: str) -> str:
    """Go's `%q` for the strings that appear in flag errors."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def parse_go_bool(text: str) -> bool:
    """`strconv.ParseBool`; raises ValueError("parse error")."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError("parse error")


_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def _underscores_ok(text: str) -> bool:
    """Go's `underscoreOK`: `_` only between digits, or right after a base prefix."""
    saw = "^"
    i = 0
    if text and text[0] in "+-":
        text = text[1:]
    hexadecimal = False
    if len(text) >= 2 and text[0] == "0" and text[1] in "bBoOxX":
        i = 2
        saw = "0"
        hexadecimal = text[1] in "xX"
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or (hexadecimal and ch in "abcdefABCDEF"):
            saw = "0"
        elif ch == "_":
            if saw != "0":
                return False
            saw = "_"
        else:
            if saw == "_":
                return False
            saw = "!"
        i += 1
    return saw != "_"


def parse_go_int(text: str) -> int:
    """`strconv.ParseInt(text, 0, 64)`; raises ValueError("parse error"/"value out of range")."""
    body = text
    sign = 1
    if body[:1] in ("+", "-"):
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if not body:
        raise ValueError("parse error")
    base = 10
    digits = body
    if body[0] == "0" and len(body) > 1:
        marker = body[1].lower()
        if marker in "box":
            base = {"b": 2, "o": 8, "x": 16}[marker]
            digits = body[2:]
        else:
            base = 8
            digits = body[1:]
    if "_" in digits:
        if not _underscores_ok(text):
            raise ValueError("parse error")
        digits = digits.replace("_", "")
    if not digits or any(ch not in _DIGITS[base] for ch in digits):
        raise ValueError("parse error")
    value = sign * int(digits, base)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError("value out of range")
    return value


def parse_flags(args: Sequence[str] | None, flags: Sequence[Flag]) -> ParsedArgs:
    """Parse `args` like a Go FlagSet holding `flags` (ContinueOnError).

    Args:
        args: the plugin's argument list (None is an empty list).
        flags: the flags the plugin defines.

    Returns:
        ParsedArgs with every flag's value (defaults where unset), the error text
        of the first failure (`""` when none) and the elements left unparsed.
    """
    formal: Mapping[str, Flag] = {flag.name: flag for flag in flags}
    values: dict[str, str | bool | int] = {flag.name: flag.default for flag in flags}
    rest = list(args or ())
    while rest:
        text = rest[0]
        if len(text) < 2 or text[0] != "-":
            break
        minuses = 1
        if text[1] == "-":
            minuses = 2
            if len(text) == 2:
                rest.pop(0)
                break
        name = text[minuses:]
        if not name or name[0] in "-=":
            return ParsedArgs(values, f"bad flag syntax: {text}", tuple(rest))
        rest.pop(0)
        has_value, value = False, ""
        if "=" in name[1:]:
            cut = name.index("=", 1)
            name, value, has_value = name[:cut], name[cut + 1 :], True
        flag = formal.get(name)
        if flag is None:
            if name in ("help", "h"):
                return ParsedArgs(values, "flag: help requested", tuple(rest))
            return ParsedArgs(values, f"flag provided but not defined: -{name}", tuple(rest))
        if flag.type == "bool":
            if not has_value:
                values[name] = True
                continue
            try:
                values[name] = parse_go_bool(value)
            except ValueError as err:
                return ParsedArgs(
                    values, f"invalid boolean value {go_quote(value)} for -{name}: {err}", tuple(rest)
                )
            continue
        if not has_value:
            if not rest:
                return ParsedArgs(values, f"flag needs an argument: -{name}", tuple(rest))
            value = rest.pop(0)
        if flag.type == "int":
            try:
                values[name] = parse_go_int(value)
            except ValueError as err:
                return ParsedArgs(
                    values, f"invalid value {go_quote(value)} for flag -{name}: {err}", tuple(rest)
                )
        else:
            values[name] = value
    return ParsedArgs(values, "", tuple(rest))


_SPLIT = re.compile(r"\s*,\s*")


def split_list(text: str) -> list[str]:
    """A comma-separated list: blanks trimmed, empties dropped, first occurrence kept."""
    seen: list[str] = []
    for part in _SPLIT.split(text.strip()):
        if part and part not in seen:
            seen.append(part)
    return seen
