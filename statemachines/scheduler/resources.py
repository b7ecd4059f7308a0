"""Resource vectors as the Volcano scheduler counts them (`pkg/scheduler/api/resource_info.go`).

A `Res` holds millicores (`cpu`), bytes (`mem`) and scalar resources (`sc`, a dict):
`pods` as a plain count, every other scalar (`nvidia.com/gpu`, `hugepages-*`,
`ephemeral-storage`, ...) in milli-units. All comparisons use Volcano's tolerance
`EPS = 0.1` in those raw units. Plain floats and small dicts keep the hot loops
cheap; `Res` is mutable on purpose (session accounting adds and subtracts in place)
and `copy()` is explicit.

Scalar names are visited in sorted order wherever Volcano walks a Go map, so the
"first failing dimension" is deterministic (cpu, memory, then scalars by name).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from statemachines.admission.quantity import Quantity, QuantityError

EPS = 0.1
PODS = "pods"


class Res:
    """One resource vector; `sc` maps scalar names (including `pods`) to amounts."""

    __slots__ = ("cpu", "mem", "sc")

    def __init__(self, cpu: float = 0.0, mem: float = 0.0, sc: dict[str, float] | None = None) -> None:
        self.cpu = cpu
        self.mem = mem
        self.sc = sc if sc is not None else {}

    def copy(self) -> Res:
        return Res(self.cpu, self.mem, dict(self.sc))

    def get(self, name: str) -> float:
        if name == "cpu":
            return self.cpu
        if name == "memory":
            return self.mem
        return self.sc.get(name, 0.0)

    def add(self, other: Res) -> Res:
        """In place: self += other."""
        self.cpu += other.cpu
        self.mem += other.mem
        sc = self.sc
        for name, value in other.sc.items():
            sc[name] = sc.get(name, 0.0) + value
        return self

    def sub(self, other: Res) -> Res:
        """In place: self -= other (Volcano's `sub`; scalars missing on the left stay missing)."""
        self.cpu -= other.cpu
        self.mem -= other.mem
        sc = self.sc
        if sc:
            for name, value in other.sc.items():
                sc[name] = sc.get(name, 0.0) - value
        return self

    def plus(self, other: Res) -> Res:
        return self.copy().add(other)

    def scaled(self, ratio: float) -> Res:
        return Res(self.cpu * ratio, self.mem * ratio, {k: v * ratio for k, v in self.sc.items()})

    def is_empty(self) -> bool:
        """`IsEmpty`: every dimension but `pods` below EPS (a best-effort request)."""
        if self.cpu >= EPS or self.mem >= EPS:
            return False
        for name, value in self.sc.items():
            if name != PODS and value >= EPS:
                return False
        return True

    def names(self) -> list[str]:
        """`ResourceNames`: the dimensions with a value >= EPS (pods included)."""
        out = []
        if self.cpu >= EPS:
            out.append("cpu")
        if self.mem >= EPS:
            out.append("memory")
        out.extend(name for name in sorted(self.sc) if self.sc[name] >= EPS)
        return out

    def key(self) -> tuple:
        """A hashable value (for signatures and equality)."""
        return (self.cpu, self.mem, tuple(sorted(self.sc.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Res) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        extra = "".join(f", {k} {v:g}" for k, v in sorted(self.sc.items()))
        return f"Res(cpu {self.cpu:g}, memory {self.mem:g}{extra})"


def _le(left: float, right: float) -> bool:
    return left < right or abs(left - right) < EPS


def less_equal(a: Res, b: Res, *, infinity: bool = False) -> bool:
    """`LessEqual(a, b, Zero|Infinity)` with the EPS tolerance."""
    if not (a.cpu < b.cpu or abs(a.cpu - b.cpu) < EPS):
        return False
    if not (a.mem < b.mem or abs(a.mem - b.mem) < EPS):
        return False
    bsc = b.sc
    if infinity:
        for name in bsc:
            if name not in a.sc:
                return False
    for name, value in a.sc.items():
        right = bsc.get(name)
        if right is None:
            if infinity:
                continue
            right = 0.0
        if not (value < right or abs(value - right) < EPS):
            return False
    return True


def failing_names(a: Res, b: Res, *, infinity: bool = False) -> list[str]:
    """`LessEqualWithResourcesName`: the dimensions where a > b (cpu, memory, scalars by name)."""
    out = []
    if not _le(a.cpu, b.cpu):
        out.append("cpu")
    if not _le(a.mem, b.mem):
        out.append("memory")
    for name in sorted(a.sc):
        right = b.sc.get(name)
        if right is None:
            if infinity:
                continue
            right = 0.0
        if not _le(a.sc[name], right):
            out.append(name)
    return out


def exceeds_on_requested(a: Res, b: Res, req: Res) -> list[str]:
    """`LessEqualWithDimensionAndResourcesName(a, b, req)` inverted: names where a > b strictly,
    checking only the dimensions req asks for (> 0), never `pods`, no EPS."""
    out = []
    if req.cpu > 0 and a.cpu > b.cpu:
        out.append("cpu")
    if req.mem > 0 and a.mem > b.mem:
        out.append("memory")
    if not a.sc:
        return out
    for name in sorted(req.sc):
        if name == PODS:
            continue
        if req.sc[name] > 0 and a.sc.get(name, 0.0) > b.sc.get(name, 0.0):
            out.append(name)
    return out


def exceeded_part(a: Res, b: Res) -> Res:
    """`ExceededPart(a, b)`: per dimension max(a - b, 0) (dimensions of both, missing = 0)."""
    out = Res(max(a.cpu - b.cpu, 0.0), max(a.mem - b.mem, 0.0))
    for name in set(a.sc) | set(b.sc):
        diff = a.sc.get(name, 0.0) - b.sc.get(name, 0.0)
        if diff > 0:
            out.sc[name] = diff
    return out


def min_dims(a: Res, b: Res, *, infinity: bool = False) -> Res:
    """`MinDimensionResource(a, b)`: a copy of a clamped by b; a's scalars missing in b
    become 0 (Zero) or stay (Infinity)."""
    out = Res(min(a.cpu, b.cpu), min(a.mem, b.mem))
    for name, value in a.sc.items():
        right = b.sc.get(name)
        if right is None:
            out.sc[name] = value if infinity else 0.0
        else:
            out.sc[name] = min(value, right)
    return out


def max_dims(a: Res, b: Res) -> Res:
    """`helpers.Max`: per-dimension max, ignoring negative scalars."""
    out = Res(max(a.cpu, b.cpu), max(a.mem, b.mem))
    for name, value in a.sc.items():
        if value >= 0:
            out.sc[name] = value
    for name, value in b.sc.items():
        if value >= 0:
            out.sc[name] = max(value, out.sc.get(name, 0.0))
    return out


def share(used: float, total: float) -> float:
    """`helpers.Share`: used/total, with x/0 = 0 if x == 0 else 1."""
    if total == 0:
        return 0.0 if used == 0 else 1.0
    return used / total


# ------------------------------------------------------------------ Kubernetes quantities


def is_scalar_name(name: str) -> bool:
    """Kubernetes `IsScalarResourceName`: extended, hugepages, prefixed native, attachable volumes."""
    if name.startswith("hugepages-") or name.startswith("attachable-volumes-"):
        return True
    if "/" not in name:
        return False
    return not name.startswith("requests.")  # else extended (domain/name) or prefixed native (kubernetes.io/...)


def parse_quantity(raw: object, where: str) -> Quantity:
    try:
        return Quantity.parse(raw)
    except QuantityError as err:
        raise ValueError(f"{where}: {err}") from None


_PARSED: dict[tuple[object, bool], float] = {}  # memo: (raw, milli) -> amount, raw a str; quantity strings repeat a lot


def _amount(raw: object, milli: bool, where: str) -> float:
    key = (raw, milli)
    if isinstance(raw, str):
        cached = _PARSED.get(key)
        if cached is not None:
            return cached
    q = parse_quantity(raw, where)
    value = float(q.milli_value() if milli else q.ceil_value())
    if isinstance(raw, str):
        if len(_PARSED) > 50_000:
            _PARSED.clear()
        _PARSED[key] = value
    return value


def from_resource_list(raw: Mapping[str, object] | None, where: str = "resources") -> Res:
    """`NewResource(ResourceList)`: cpu in milli, memory/pods as values, other scalars in milli;
    `count/*` and non-scalar names (`requests.cpu`, `storage`) are ignored."""
    out = Res()
    if not raw:
        return out
    for name, value in raw.items():
        if name == "cpu":
            out.cpu += _amount(value, True, f"{where}.cpu")
        elif name == "memory":
            out.mem += _amount(value, False, f"{where}.memory")
        elif name == PODS:
            out.sc[PODS] = out.sc.get(PODS, 0.0) + _amount(value, False, f"{where}.pods")
        elif name == "ephemeral-storage" or (not name.startswith("count/") and is_scalar_name(name)):
            out.sc[name] = out.sc.get(name, 0.0) + _amount(value, True, f"{where}.{name}")
    return out


def to_quantities(res: Res) -> dict[str, str]:
    """`ConvertRes2ResList` printed: cpu milli (DecimalSI), memory bytes (BinarySI), pods a count,
    other scalars milli (DecimalSI); values truncated to integers as Go's int64() does."""
    out = {
        "cpu": str(Quantity(Fraction(int(res.cpu), 1000), "DecimalSI")),
        "memory": str(Quantity(int(res.mem), "BinarySI")),
    }
    for name in sorted(res.sc):
        value = res.sc[name]
        if name == PODS:
            out[name] = str(Quantity(int(value), "DecimalSI"))
        else:
            out[name] = str(Quantity(Fraction(int(value), 1000), "DecimalSI"))
    return out


def quantities_key(raw: Mapping[str, str] | None) -> tuple:
    """A comparable form of a ResourceList (semantic equality: equal amounts, any spelling)."""
    if not raw:
        return ()
    items: list[tuple[str, Fraction | str]] = []
    for name, value in raw.items():
        try:
            items.append((name, Quantity.parse(value).value))
        except QuantityError:
            items.append((name, str(value)))
    return tuple(sorted(items))
