"""The data behind `vcbus replay --html`: pod lanes and the raw records rows came from.

The replay report (projections/replay.py) has each job's phase changes and
actions but nothing about pods, whose phases are what the lanes of the HTML
timeline show. `collect_lanes` reads the same logs a second time, in the same
order as the replay (merged by resourceVersion when the replay merged them,
numbered the same way), and keeps per job:

- one lane per pod name, grouped by task; a lane is a list of segments, one per
  (pod uid, phase) span, so a pod recreated at a new job version starts a new
  segment with that version;
- the raw JSON of the records that changed a row (a pod segment, a job phase,
  an action), so a click on the page can show the record behind it.

Raw records are bounded: at most `max_records`, each cut to `max_bytes`
characters; how many were left out or cut is returned so the page can say so.
Time follows the replay's rule: a record's `time`, else the latest timestamp
inside the object, never going backwards.
"""

from __future__ import annotations

import json
from typing import Iterable, Iterator

from statemachines.model.objects import Pod
from statemachines.model.record_time import object_time
from statemachines.model.records import Observed
from statemachines.model.timefmt import normalize
from vcbus.logmarks import synced_first
from vcbus.logmerge import merge
from vcbus.replaying import Until
from vcbus.watchlog import Item, iter_log

JOB_LABEL = "volcano.sh/job-name"
TASK_LABEL = "volcano.sh/task-spec"
VERSION_ANNOTATION = "volcano.sh/job-version"
MAX_RECORDS = 400
MAX_BYTES = 12_000


def _items(inputs: list[tuple[Iterable[bytes], str]], merged: bool) -> Iterator[Item]:
    """The records in the replay's order and numbering (a marked initial list first: `vcbus.logmarks`)."""
    if merged or len(inputs) > 1:
        items, _ = merge(inputs, on_invalid=lambda err: None)
        return synced_first(iter(items))[0]
    lines, source = inputs[0]
    return synced_first(iter_log(lines, source))[0]


def _pretty(data: bytes) -> str:
    try:
        return json.dumps(json.loads(data), indent=2, ensure_ascii=False)
    except ValueError:
        return data.decode("utf-8", "replace")


class _Lanes:
    def __init__(self, jobs: set[str]) -> None:
        self.jobs = jobs
        self.pods: dict[str, dict[str, dict]] = {k: {} for k in jobs}  # job -> pod name -> lane
        self.open: dict[tuple[str, str], dict] = {}  # (job, pod) -> its open segment

    def pod(self, seq: int, when: str | None, rtype: str, pod: Pod) -> bool:
        """Fold one pod record; True when it changed a row (its raw record is worth keeping)."""
        meta = pod.metadata
        job = (meta.labels or {}).get(JOB_LABEL)
        key = f"{meta.namespace}/{job}"
        if job is None or key not in self.jobs:
            return False
        lanes = self.pods[key]
        lane = lanes.get(meta.name)
        if lane is None:
            task = (meta.labels or {}).get(TASK_LABEL, "")
            lane = lanes[meta.name] = {"name": meta.name, "task": task, "segments": []}
        seg = self.open.get((key, meta.name))
        if rtype == "DELETED":
            if seg is None or seg["uid"] != meta.uid:
                return False
            seg["end"], seg["endSeq"], seg["deleted"] = when, seq, True
            del self.open[(key, meta.name)]
            return True
        phase = pod.status.phase or "Pending"
        if meta.deletion_timestamp:
            phase = f"{phase} (terminating)"
        if seg is not None and seg["uid"] == meta.uid and seg["phase"] == phase:
            return False
        if seg is not None:
            seg["end"], seg["endSeq"] = when, seq
        version = (meta.annotations or {}).get(VERSION_ANNOTATION, "")
        new = {"phase": phase, "uid": meta.uid, "version": version, "start": when, "seq": seq,
               "end": None, "endSeq": None, "deleted": False}
        lane["segments"].append(new)
        self.open[(key, meta.name)] = new
        return True

    def grouped(self, key: str) -> list[dict]:
        """The job's lanes as [{task, pods: [lane...]}], tasks and pods in name order."""
        tasks: dict[str, list[dict]] = {}
        for name in sorted(self.pods[key]):
            lane = self.pods[key][name]
            tasks.setdefault(lane["task"], []).append(lane)
        return [{"task": t, "pods": tasks[t]} for t in sorted(tasks)]


def collect_lanes(
    inputs: list[tuple[Iterable[bytes], str]],
    report: dict,
    *,
    merged: bool = False,
    until: Until | None = None,
    max_records: int = MAX_RECORDS,
    max_bytes: int = MAX_BYTES,
) -> dict:
    """Lanes per job key, the raw records that changed a row, and what was left out of them."""
    until = until or Until(None)
    jobs = {f"{j['namespace']}/{j['name']}" for j in report["jobs"]}
    wanted: set[int] = set()  # seqs the report's rows came from
    for j in report["jobs"]:
        wanted.update(h["seq"] for h in j["history"])
        wanted.update(a["seq"] for a in j["actions"])
        wanted.update(d["seq"] for d in j["divergences"])  # the recorded status that differs
    lanes = _Lanes(jobs)
    records: dict[int, dict] = {}
    state = {"dropped": 0, "cut": 0, "now": None}

    def keep(seq: int, when: str | None, rtype: str, obj, data: bytes) -> None:
        if seq in records:
            return
        if len(records) >= max_records:
            state["dropped"] += 1
            return
        text = _pretty(data)
        cut = len(text) > max_bytes
        if cut:
            state["cut"] += 1
            text = text[:max_bytes] + f"\n... (cut: {len(text) - max_bytes} more characters)"
        meta = obj.metadata
        records[seq] = {"seq": seq, "time": when, "type": rtype, "kind": type(obj).__name__,
                        "name": f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name,
                        "text": text, "cut": cut}

    now: str | None = None
    for seq, data, decoded in _items(inputs, merged):
        if until.seq is not None and seq > until.seq:
            break
        if not isinstance(decoded, Observed):
            continue
        obj = decoded.object
        try:
            when = decoded.time or object_time(obj)
            when = normalize(when) if when else None
        except ValueError:  # not RFC 3339: absent, as for the replay (which warns about it)
            when = None
        if when:
            if until.time is not None and when > until.time:
                break
            if now is None or when > now:
                now = when
        changed = lanes.pod(seq, now, decoded.type, obj) if isinstance(obj, Pod) else False
        if changed or seq in wanted:  # a pod segment, a job phase change or an action came from this record
            keep(seq, now, decoded.type, obj, data)
    return {
        "lanes": {k: lanes.grouped(k) for k in jobs},
        "records": records,
        "dropped": state["dropped"],
        "cut": state["cut"],
        "end": now,
        "maxRecords": max_records,
        "maxBytes": max_bytes,
    }
