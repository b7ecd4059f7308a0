"""Kubernetes resource quantities (`1`, `500m`, `2Gi`, `1e3`): parse, add, compare, print.

Just enough of apimachinery's `resource.Quantity` for admission messages and
PodGroup `minResources`: exact arithmetic on `Fraction`s, the three formats
(BinarySI, DecimalSI, DecimalExponent) and the canonical string form
(`String()`), in which a BinarySI amount below 1024 or not a whole number is
printed as DecimalSI and anything finer than nano is rounded up.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Literal

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX = {power: suffix for suffix, power in _BINARY.items()}
_PATTERN = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")


class QuantityError(ValueError):
    """Not a quantity (apimachinery: `quantities must match the regular expression ...`)."""


class Quantity:
    """An exact amount plus the format it prints in."""

    __slots__ = ("value", "format")

    def __init__(self, value: Fraction | int, format: Format = "DecimalSI") -> None:
        self.value = Fraction(value)
        self.format: Format = format

    @classmethod
    def parse(cls, raw: object) -> Quantity:
        """Parse a manifest value (string, int or float)."""
        if isinstance(raw, bool):
            raise QuantityError(f"{raw!r} is not a quantity")
        if isinstance(raw, int):
            return cls(raw)
        if isinstance(raw, float):
            return cls(Fraction(repr(raw)))
        text = str(raw).strip()
        match = _PATTERN.match(text)
        if not match:
            raise QuantityError(f"quantities must match the regular expression, got {text!r}")
        number, suffix = match.groups()
        amount = Fraction(number)
        if suffix in _BINARY:
            return cls(amount * 1024 ** _BINARY[suffix], "BinarySI")
        if suffix in _DECIMAL:
            return cls(amount * Fraction(10) ** _DECIMAL[suffix], "DecimalSI")
        exp = re.fullmatch(r"[eE]([+-]?[0-9]+)", suffix)
        if exp:
            return cls(amount * Fraction(10) ** int(exp.group(1)), "DecimalExponent")
        raise QuantityError(f"unable to parse quantity's suffix in {text!r}")

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.format)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def ceil_value(self) -> int:
        """`Value()`: the amount rounded up to an integer."""
        return -((-self.value.numerator) // self.value.denominator)

    def milli_value(self) -> int:
        """`MilliValue()`: the amount in thousandths, rounded up."""
        scaled = self.value * 1000
        return -((-scaled.numerator) // scaled.denominator)

    def __str__(self) -> str:
        value = self.value
        fmt = self.format
        if fmt == "BinarySI" and (-1024 < value < 1024 or value.denominator != 1):
            fmt = "DecimalSI"
        if fmt == "BinarySI":
            number, power = value.numerator, 0
            while power < 6 and number % 1024 == 0 and number != 0:
                number //= 1024
                power += 1
            return f"{number}{_BINARY_SUFFIX.get(power, '')}"
        nanos = value * 10**9
        nanos_int = -((-nanos.numerator) // nanos.denominator)  # round up to nano
        if nanos_int == 0:
            return "0"
        exp = -9
        while nanos_int % 1000 == 0 and exp < 18:
            nanos_int //= 1000
            exp += 3
        if fmt == "DecimalExponent":
            return f"{nanos_int}" + (f"e{exp}" if exp else "")
        return f"{nanos_int}{_DECIMAL_SUFFIX[exp]}"


def parse_or_none(raw: object) -> Quantity | None:
    try:
        return Quantity.parse(raw)
    except QuantityError:
        return None


def add_lists(total: dict[str, Quantity], more: dict[str, Quantity]) -> dict[str, Quantity]:
    """`quotav1.Add`: a new list; a name missing on the left takes the right's format."""
    result = dict(total)
    for name, quantity in more.items():
        result[name] = result[name] + quantity if name in result else Quantity(quantity.value, quantity.format)
    return result


def parse_list(raw: dict[str, object] | None) -> dict[str, Quantity]:
    """A ResourceList from a manifest; unparsable entries are skipped."""
    result = {}
    for name, value in (raw or {}).items():
        quantity = parse_or_none(value)
        if quantity is not None:
            result[name] = quantity
    return result


def print_list(resources: dict[str, Quantity]) -> dict[str, str]:
    return {name: str(quantity) for name, quantity in sorted(resources.items())}
