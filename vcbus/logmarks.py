"""Records in a watch log that are about the log itself: where its initial list ends, and its gaps.

**The initial list.** A recording that starts while jobs run begins with a
list of what exists (`vcbus record` writes it as ADDED records, in
resourceVersion order), then the watch. In that order a vcjob whose status was
written before its pods were last updated comes before its pods, and a fold
that decides at each record asks for pods that exist two records later.
Volcano's controller waits for all its informers' caches to sync before a worker
takes the first request (`WaitForCacheSync` in `Run`,
pkg/controllers/job/job_controller.go). `vcbus record` (format 2) marks the
list with two BOOKMARK records (`initial_list_marks`): one before it, whose
object carries the annotation `vcbus.volcano.sh/record-format: "2"`, and one
after it, marked as the API server marks the end of a watch's initial events
(`sendInitialEvents`): `k8s.io/initial-events-end: "true"`. `synced_first`
puts the list's records in the order that gives the engine every cache before
any job decides: queues, podgroups, pods and the kinds vcbus does not act on
first, then the vcjobs, then the Commands (each kind in its own order), and
numbers them so. Only a log that starts with the first mark is read ahead, so
any other log (kubectl's, recordings of format 1) streams as before, live or not.

**Gaps.** A watch that falls too far behind gets an ERROR event (a `Status`,
410 Expired: "too old resource version") and must list again; changes in
between are not in the log. `watch_error` words the warning.
"""

from __future__ import annotations

import itertools
from typing import Iterator

import msgspec

from statemachines.model.objects import Command, Job
from statemachines.model.records import Ignored, Observed
from vcbus.watchlog import Item

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
RECORD_FORMAT = "vcbus.volcano.sh/record-format"
RECORD_FORMAT_VERSION = "2"  # 2: the initial list between two bookmarks; 1 (before) had no marks
_FORMAT, _END = RECORD_FORMAT.encode(), INITIAL_EVENTS_END.encode()


def _bookmark_annotations(decoded: object, data: bytes, mark: bytes) -> dict:
    """The annotations of a BOOKMARK record that mentions `mark`; {} for any other record."""
    if decoded.__class__ is not Ignored or decoded.kind != "BOOKMARK" or mark not in data:
        return {}
    try:
        meta = msgspec.json.decode(data).get("object", {}).get("metadata", {})
        return meta.get("annotations") or {}
    except (msgspec.DecodeError, AttributeError):
        return {}


def initial_list_marks(revision: str) -> tuple[dict, dict]:
    """The records before and after a recording's initial list (the module doc). The second is at the
    list's `revision`; the first has no resourceVersion, so a merge by resourceVersion
    (`vcbus.logmerge`) keeps it first."""
    before = {"metadata": {"annotations": {RECORD_FORMAT: RECORD_FORMAT_VERSION}}}
    after = {"metadata": {"resourceVersion": revision, "annotations": {INITIAL_EVENTS_END: "true"}}}
    return {"type": "BOOKMARK", "object": before}, {"type": "BOOKMARK", "object": after}


def _rank(item: Item) -> int:
    obj = item[2].object  # type: ignore[attr-defined]  # the items ranked are Observed records
    cls = obj.__class__
    return 2 if cls is Command else 1 if cls is Job else 0


def synced_first(items: Iterator[Item], *, interruptible: bool = False) -> tuple[Iterator[Item], int, bool]:
    """`items` with a marked initial list in cache-sync order (module doc), and the record number of
    the mark that ends it (0: none); else `items` as they are.

    Reads ahead only in a log that starts with the recording's format mark, and there
    only while records are ADDED (an initial list is nothing else): any other log
    streams as it comes. With `interruptible`, Ctrl-C while reading ahead hands on what
    was read, in its order, and says so (True)."""
    head: list[Item] = []
    end = 0
    try:
        for item in items:
            head.append(item)
            if len(head) == 1:
                if _bookmark_annotations(item[2], item[1], _FORMAT).get(RECORD_FORMAT) is None:
                    break  # not a marked recording: nothing to wait for
                continue
            decoded = item[2]
            if decoded.__class__ is Observed and decoded.type == "ADDED":
                continue
            if _bookmark_annotations(decoded, item[1], _END).get(INITIAL_EVENTS_END) == "true":
                in_order = sorted(head[1:-1], key=_rank)  # stable: each kind keeps its order
                first = head[0][0]
                head = [(first + i, data, dec) for i, (_, data, dec) in enumerate([head[0], *in_order, item])]
                end = head[-1][0]
            break
    except KeyboardInterrupt:
        if not interruptible:
            raise
        return iter(head), 0, True
    return itertools.chain(head, items), end, False


def watch_error(source: str, seq: int, data: bytes) -> str:
    """The warning for a watch ERROR record: what the server said, and that the log has a gap there."""
    try:
        status = msgspec.json.decode(data).get("object") or {}
    except (msgspec.DecodeError, AttributeError):
        status = {}
    said = " ".join(str(status[k]) for k in ("code", "reason") if status.get(k))
    if status.get("message"):
        said = f"{said}: {status['message']}" if said else str(status["message"])
    return (
        f"{source}: record {seq}: a watch ERROR ({said or 'no status'}): the watch stopped here and listed again, "
        "so changes in between are missing from the log (a gap); decisions after it may be wrong. "
        "`vcbus record` relists and writes what changed (docs/replay.md)"
    )
