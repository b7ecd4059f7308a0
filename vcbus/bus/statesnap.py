"""Snapshots of the decider's and the projector's state in memory, so a start need not refold the log.

(Not `vcbus.snapshots`: that module reads *cluster* snapshots for the offline scheduler commands.)

The decider's engine and the projector's views are folds of a stream. A snapshot is such a fold
saved together with the stream sequence it covers; a start restores the newest valid snapshot
and folds only the records after it, so start-up time follows the live state, not the log's
length. When to save is the caller's business (`BusSettings.snapshot_every` records, and a clean
stop); what makes a snapshot safe to save is too (the decider saves only when every record it
covers has its outputs stored, the projector only after writing its keys).

Where. The JetStream object store `vcbus_snapshots` (stream `OBJ_vcbus_snapshots`, replicas as
VCBUS_K8S), one object per save named `<owner>.<seq, 12 digits>`; the newest `KEEP` of each owner
are kept. The object store chunks large values and checks its own SHA-256 on read.

Format (a snapshot is input, and treated as hostile):

    VCBUS-SNAPSHOT\\n<header: one line of JSON>\\n<payload: a pickle>

The header (`Header`, decoded by msgspec into fixed types) names the format (`FORMAT`), the
owner, the covered sequence, the stream and its creation time (a stream deleted and created
again restarts its sequences: the old snapshot does not describe it), a fingerprint of the code
that folds (`code_fingerprint`: the source of `statemachines/`, `projections/` and the views; any
change to them makes older snapshots "old format"), a fingerprint of the fold's configuration
(engine options, partition, history retention), the payload's size and SHA-256. Only when all of
these match is the payload unpickled, by an unpickler that resolves classes of `statemachines`
and `projections` (and a few plain containers) only: no other global, so no `os.system`, no
`getattr` gadget. Functions the state refers to but that are not state (the decider's pod and
PodGroup renderers) are saved as references and re-attached from the running process.

Anything wrong (missing magic, bad JSON, other format, other code or configuration, other stream,
wrong size, wrong digest, a refused class, any unpickling error) makes the snapshot *invalid*:
a warning names the object and the reason, the next older one is tried, and with none left the
caller refolds from sequence 1. Saving never stops the caller: a failure is a warning.

Trust: the SHA-256 detects corruption and truncation, not forgery; whoever can write to
`OBJ_vcbus_snapshots` (or `$O.vcbus_snapshots.>`) can change the state the decider resumes
from, so give that permission to the decider and projector only (docs/operations.md, Snapshots).
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import pathlib
import pickle
import time
from typing import Any, NamedTuple

import msgspec
from nats.js import api
from nats.js.client import JetStreamContext
from nats.js.errors import BucketNotFoundError, NotFoundError

log = logging.getLogger("vcbus.statesnap")  # not vcbus.snapshots: the cluster snapshots of the offline scheduler

BUCKET = "vcbus_snapshots"
FORMAT = 1
MAGIC = b"VCBUS-SNAPSHOT\n"
KEEP = 2  # newest snapshots kept per owner (an older one serves when the newest is invalid)
MAX_SIZE = 1 << 30  # bytes; a bigger object is not even read
_ROOT = pathlib.Path(__file__).resolve().parents[2]
_FOLD_SOURCES = ("statemachines", "projections", "vcbus/bus/views.py")
_SAFE_MODULES = ("statemachines", "projections")  # and their submodules
_SAFE_GLOBALS = frozenset(
    {
        ("collections", "deque"),
        ("collections", "OrderedDict"),
        ("collections", "defaultdict"),
        ("collections", "Counter"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "bytearray"),
        ("builtins", "slice"),
        ("msgspec", "Raw"),
        ("msgspec", "UNSET"),
        ("msgspec._utils", "rebuild"),  # a Struct's reduce: the class itself is checked too
        ("vcbus.bus.statesnap", "_struct"),  # ours, keeps default objects (see _Pickler.reducer_override)
        ("vcbus.bus.views", "Views"),
        ("vcbus.bus.views", "PendingTimer"),
    }
)


class Header(msgspec.Struct, forbid_unknown_fields=True):
    format: int
    owner: str
    seq: int
    stream: str
    stream_created: str
    code: str
    config: str
    size: int
    sha256: str
    saved: float = 0.0  # wall clock at save (information only)


class Invalid(ValueError):
    """This snapshot cannot be used (the message says why)."""


class Restored(NamedTuple):
    seq: int
    state: Any
    payload: bytes  # to restore the same state again (the decider's rollback)
    name: str


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 (hex, 16 chars) over the source of everything that folds: a code change is a format change."""
    h = hashlib.sha256(f"format {FORMAT}\n".encode())
    for rel in _FOLD_SOURCES:
        path = _ROOT / rel
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            h.update(str(f.relative_to(_ROOT)).encode() + b"\0")
            h.update(f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


# ------------------------------------------------------------------ bytes


def encode(state: Any, *, header: Header, hooks: dict[str, Any] | None = None) -> bytes:
    """MAGIC, header line, pickle of `state` (objects in `hooks` saved as their names)."""
    buf = io.BytesIO()
    pickler = _Pickler(buf, protocol=5, hooks=hooks or {})
    pickler.dump(state)
    payload = buf.getvalue()
    head = msgspec.structs.replace(header, size=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    return MAGIC + msgspec.json.encode(head) + b"\n" + payload


def decode(blob: bytes, *, expect: dict[str, Any], hooks: dict[str, Any] | None = None) -> tuple[Header, bytes, Any]:
    """(header, payload, state) of a snapshot whose header matches `expect` (field -> value); else `Invalid`."""
    header, payload = check(blob, expect=expect)
    return header, payload, load_payload(payload, hooks=hooks)


def check(blob: bytes, *, expect: dict[str, Any]) -> tuple[Header, bytes]:
    if not blob.startswith(MAGIC):
        raise Invalid("not a vcbus snapshot (no magic line)")
    end = blob.find(b"\n", len(MAGIC))
    if end < 0:
        raise Invalid("truncated header")
    try:
        header = msgspec.json.decode(blob[len(MAGIC) : end], type=Header)
    except msgspec.DecodeError as err:
        try:  # an old format names its version in a header this one cannot read
            version = msgspec.json.decode(blob[len(MAGIC) : end]).get("format")
        except Exception:
            version = None
        if version is not None and version != FORMAT:
            raise Invalid(f"format {version!r}, this vcbus reads format {FORMAT}") from None
        raise Invalid(f"unreadable header: {err}") from None
    if header.format != FORMAT:
        raise Invalid(f"format {header.format}, this vcbus reads format {FORMAT}")
    if header.code != code_fingerprint():
        raise Invalid(f"written by other code (fold fingerprint {header.code}, this vcbus {code_fingerprint()})")
    for field, want in expect.items():
        have = getattr(header, field)
        if have != want:
            raise Invalid(f"{field} {have!r}, expected {want!r}")
    payload = blob[end + 1 :]
    if len(payload) != header.size:
        raise Invalid(f"truncated: {len(payload)} of {header.size} bytes")
    if hashlib.sha256(payload).hexdigest() != header.sha256:
        raise Invalid("SHA-256 of the payload does not match its header")
    return header, payload


def load_payload(payload: bytes, *, hooks: dict[str, Any] | None = None) -> Any:
    try:
        return _Unpickler(io.BytesIO(payload), hooks=hooks or {}).load()
    except Invalid:
        raise
    except RecursionError:
        raise Invalid("payload nested too deeply") from None
    except Exception as err:
        raise Invalid(f"payload unreadable: {type(err).__name__}: {err}") from None


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, *, protocol: int, hooks: dict[str, Any]) -> None:
        super().__init__(file, protocol=protocol)
        self._hooks = {id(v): k for k, v in hooks.items() if v is not None}

    def persistent_id(self, obj: Any) -> str | None:
        return self._hooks.get(id(obj))

    def reducer_override(self, obj: Any) -> Any:
        if not isinstance(obj, msgspec.Struct):
            return NotImplemented
        cls = type(obj)
        defaults = _defaults(cls)
        if not defaults:
            return NotImplemented
        values = tuple(getattr(obj, f) for f in cls.__struct_fields__)
        mask = 0
        for i, d in defaults.items():
            if values[i] is d:
                mask |= 1 << i
        return _struct, (cls, values, mask)


# msgspec's `omit_defaults` leaves a field out only when its value *is* the default object (equal
# is not enough), and unpickling makes new objects: a restored struct would encode
# `"policy":"default"` where the refolded one omits it, the same meaning in other bytes. So a
# struct with defaults is saved with a mask of the fields that held the default object itself, and
# restored with those objects again: a restore encodes byte for byte as the refold it replaces.


@functools.cache
def _defaults(cls: type) -> dict[int, Any]:
    infos = msgspec.structs.fields(cls)
    return {i: f.default for i, f in enumerate(infos) if f.default is not msgspec.NODEFAULT}


def _struct(cls: Any, values: Any, mask: Any) -> Any:
    """Rebuild a struct saved by `_Pickler.reducer_override` (its class was checked by find_class)."""
    if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)) or type(values) is not tuple:
        raise Invalid("a struct saved with something else than a struct class and its values")
    fields = cls.__struct_fields__
    if len(values) != len(fields) or type(mask) is not int:
        raise Invalid(f"a {cls.__name__} saved with {len(values)} values for {len(fields)} fields")
    if mask:
        defaults = _defaults(cls)
        values = tuple(defaults[i] if mask >> i & 1 and i in defaults else v for i, v in enumerate(values))
    return cls(**dict(zip(fields, values, strict=True)))


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, *, hooks: dict[str, Any]) -> None:
        super().__init__(file)
        self._hooks = hooks

    def persistent_load(self, pid: Any) -> Any:
        if not isinstance(pid, str) or pid not in self._hooks or self._hooks[pid] is None:
            raise Invalid(f"refers to {pid!r}, which this process does not have")
        return self._hooks[pid]

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        if module.split(".", 1)[0] in _SAFE_MODULES and name.isidentifier() and not name.startswith("_"):
            found = super().find_class(module, name)
            # a class defined there (not a function, not something imported into the module)
            if isinstance(found, type) and str(found.__module__).split(".", 1)[0] in _SAFE_MODULES:
                return found
        raise Invalid(f"refers to {module}.{name}, which a snapshot may not")


# ------------------------------------------------------------------ the store


class Store:
    """Save and restore one owner's snapshots of a fold of `stream` in the object store."""

    def __init__(self, js: JetStreamContext, *, owner: str, stream: str, config: str) -> None:
        self.js = js
        self.owner = owner
        self.stream = stream
        self.config = config
        self.saved_seq = 0  # the newest snapshot saved or restored by this process
        self.tried_seq = 0  # the last save attempted (a failed one is not retried for `every` records)
        self.saves = 0
        self.last_save_s = 0.0

    async def _created(self) -> str:
        info = await self.js.stream_info(self.stream)
        created = getattr(info, "created", None)
        return created.isoformat() if hasattr(created, "isoformat") else str(created or "")

    async def _bucket(self, *, create: bool):
        try:
            return await self.js.object_store(BUCKET)
        except (BucketNotFoundError, NotFoundError):
            if not create:
                return None
        info = await self.js.stream_info(self.stream)
        replicas = int(info.config.num_replicas or 1)
        return await self.js.create_object_store(
            BUCKET,
            config=api.ObjectStoreConfig(
                bucket=BUCKET,
                description="vcbus decider/projector state snapshots (vcbus.bus.statesnap)",
                storage=api.StorageType.FILE,
                replicas=replicas,
            )
        )

    def _mine(self, name: str) -> int | None:
        prefix = self.owner + "."
        rest = name[len(prefix) :] if name.startswith(prefix) else ""
        return int(rest) if rest.isdigit() and len(rest) == 12 else None

    async def names(self) -> list[tuple[int, str]]:
        """(seq, object name) of this owner's snapshots, newest first."""
        obs = await self._bucket(create=False)
        if obs is None:
            return []
        try:
            infos = await obs.list(ignore_deletes=True)
        except NotFoundError:
            return []
        found = [(self._mine(i.name), i.name) for i in infos if i.name and not i.deleted]
        return sorted(((seq, name) for seq, name in found if seq is not None), reverse=True)

    def due(self, seq: int, every: int) -> bool:
        """True when `every` (> 0) records were folded since the last snapshot (or failed try)."""
        return every > 0 and seq - max(self.saved_seq, self.tried_seq) >= every

    async def save(self, seq: int, state: Any, *, hooks: dict[str, Any] | None = None) -> Restored | None:
        """Save `state` as covering `seq`; keep the newest `KEEP`. Returns what restores it (the
        state itself not kept), or None (and a warning) on failure."""
        t0 = time.perf_counter()
        self.tried_seq = seq
        try:
            header = Header(
                format=FORMAT, owner=self.owner, seq=seq, stream=self.stream, stream_created=await self._created(),
                code=code_fingerprint(), config=self.config, size=0, sha256="", saved=time.time(),
            )
            blob = encode(state, header=header, hooks=hooks)
            obs = await self._bucket(create=True)
            name = f"{self.owner}.{seq:012d}"
            await obs.put(name, blob)
            for _, old in (await self.names())[KEEP:]:
                await obs.delete(old)
        except Exception as err:  # a snapshot is an optimisation: never a reason to stop
            log.warning("snapshot of %s at seq %d not saved: %s: %s", self.owner, seq, type(err).__name__, err)
            return None
        self.saved_seq = seq
        self.saves += 1
        self.last_save_s = time.perf_counter() - t0
        log.info("snapshot of %s at seq %d saved (%d bytes, %.2fs)", self.owner, seq, len(blob), self.last_save_s)
        return Restored(seq, None, blob[blob.index(b"\n", len(MAGIC)) + 1 :], name)

    async def restore(
        self, *, kind: type, max_seq: int | None = None, hooks: dict[str, Any] | None = None
    ) -> Restored | None:
        """The newest valid snapshot of a `kind` (covering at most `max_seq`), or None: refold from the start."""
        try:
            names = await self.names()
            created = await self._created()
        except Exception as err:
            log.warning("snapshots of %s not readable (%s); refolding from the start", self.owner, err)
            return None
        obs = await self._bucket(create=False) if names else None
        expect = {"owner": self.owner, "stream": self.stream, "stream_created": created, "config": self.config}
        for seq, name in names:
            try:
                if max_seq is not None and seq > max_seq:
                    raise Invalid(f"covers seq {seq}, past {max_seq} (the state it starts from)")
                info = await obs.get_info(name)
                if (info.size or 0) > MAX_SIZE:
                    raise Invalid(f"{info.size} bytes, over the {MAX_SIZE} limit")
                blob = (await obs.get(name)).data or b""
                header, payload, state = decode(blob, expect=expect, hooks=hooks)
                if header.seq != seq:
                    raise Invalid(f"header says seq {header.seq}, its name {seq}")
                if type(state) is not kind:
                    raise Invalid(f"holds a {type(state).__name__}, expected a {kind.__name__}")
            except Exception as err:
                reason = str(err) if isinstance(err, Invalid) else f"{type(err).__name__}: {err}"
                log.warning("snapshot %s/%s ignored: %s", BUCKET, name, reason)
                continue
            self.saved_seq = seq
            log.info("snapshot %s/%s restored (seq %d, %d bytes)", BUCKET, name, seq, len(blob))
            return Restored(seq, state, payload, name)
        if names:
            log.warning("no valid snapshot of %s; refolding from the start", self.owner)
        return None


async def delete_all(js: JetStreamContext) -> None:
    """Remove every snapshot (the bucket itself): the next starts refold from sequence 1."""
    try:
        await js.delete_object_store(BUCKET)
    except (BucketNotFoundError, NotFoundError):
        pass
