"""Kubernetes field errors and name checks, with apimachinery v0.36 wording.

- `FieldError` prints like `field.Error.Error()`: `<path>: <Type>[: <value>][: <detail>]`
  (strings quoted Go-style, numbers and booleans bare);
- `is_qualified_name` (= `content.IsLabelKey`), `is_dns1123_label`,
  `is_dns1123_subdomain`, `is_label_value` return the reason strings;
- `go_slice` prints a list like Go's `%v`: `[a b c]`.

Go's `regexp` anchors `$` at the very end of the text, so every check uses
`re.fullmatch` (Python's `$` would also accept a trailing newline).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import msgspec

from statemachines.plugins.args import go_quote

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def regex_error(msg: str, regex: str, *examples: str) -> str:
    """`content.RegexError` (note the `', ` before each ` or `)."""
    if not examples:
        return f"{msg} (regex used for validation is '{regex}')"
    listed = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {listed}regex used for validation is '{regex}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} bytes"


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value.encode()) > 63:
        errs.append(max_len_error(63))
    if not re.fullmatch(_DNS1123_LABEL_FMT, value):
        if re.fullmatch(_DNS1123_SUBDOMAIN_FMT, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value.encode()) > 253:
        errs.append(max_len_error(253))
    if not re.fullmatch(_DNS1123_SUBDOMAIN_FMT, value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """`validation.IsQualifiedName` (an optional DNS-subdomain prefix, `/`, a name of <= 63 bytes)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + msg for msg in is_dns1123_subdomain(prefix)]
    else:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errs.append("name part " + max_len_error(63))
    if not re.fullmatch(_LABEL_KEY_FMT, name):
        errs.append("name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    errs = []
    if len(value.encode()) > 63:
        errs.append(max_len_error(63))
    if not re.fullmatch(f"({_LABEL_KEY_FMT})?", value):
        errs.append(regex_error(_LABEL_VALUE_MSG, f"({_LABEL_KEY_FMT})?", "MyValue", "my_value", "12345"))
    return errs


def go_slice(items: Iterable[object]) -> str:
    """Go's `%v` of a slice of strings: `[a b]`."""
    return "[" + " ".join(str(item) for item in items) + "]"


def go_value(value: Any) -> str:
    """How `field.Error` prints a bad value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return msgspec.json.encode(value).decode()


class FieldError(msgspec.Struct, frozen=True):
    """One `field.Error`: `kind` is Required, Invalid, Duplicate, Not found, Unsupported value or Forbidden."""

    path: str
    kind: str
    value: Any = None
    detail: str = ""
    has_value: bool = False

    def body(self) -> str:
        text = self.kind
        if self.has_value:
            text += f": {go_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "Required value", detail=detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, "Invalid value", value, detail, has_value=True)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(path, "Duplicate value", value, has_value=True)


def not_found(path: str, value: Any) -> FieldError:
    return FieldError(path, "Not found", value, has_value=True)


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    listed = ", ".join(go_quote(s) for s in supported)
    return FieldError(path, "Unsupported value", value, f"supported values: {listed}", has_value=True)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, "Forbidden", detail=detail)
