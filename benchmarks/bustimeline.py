"""Where a cluster run's time went, read back from the bus: each job's milestones, stored times.

`benchmarks/cluster.py --timeline` calls `read(url)` on `vcbus up`'s own nats-server once a
workload is over and adds `milestones(...)` to its figures. Every record of VCBUS_K8S and every
command of VCBUS_CMDS carries the time JetStream stored it, so the gaps between them say which
part of the system held a pod up:

- `create_*`: the decider's CreatePod commands stored; `added_*`: the pods' ADDED records (the
  actuator's POST, the API server, the watch and the bridge in between);
- `bind_*`: the scheduler's BindPod commands stored; `cut_*`: when the record that closed the
  binding session's snapshot (its cut, in the command's `ce-id`) was stored, so `added -> cut` is
  the wait for a session and `cut -> bind` the session itself;
- `bound_*`: the first record of each pod with its node, `running_*`: with phase Running;
- `pg_create` (the CreatePodGroup command), `pg_added`, `pg_inqueue_cmd` (the scheduler's
  status write to Inqueue), `pg_inqueue` (the PodGroup's record in phase Inqueue);
- per restart: `delete_*` (DeletePod commands), `gone_*` (the old pods' DELETED records).

`lags` splits the path of a pod's change into the bus in two: `watch`, from a pod's creation
(`creationTimestamp`) to the bridge's observation of its ADDED (the record's `time`), and
`publish`, over every Pod record, from that observation to JetStream storing the record. The
record times are whole seconds, so each figure is within a second (`publish` reads up to 1 s high,
`watch` within +-1 s); a lag of several seconds still shows which side holds records up.

Milestones are medians over the jobs of the seconds from each generation's start (the vcjob's
first record for the first pods; for the k-th restart, the record of the k-th pod of the job to
fail), `first`/`last` over a job's pods.
A generation of a job is its pods' k-th incarnation under each name.
"""

from __future__ import annotations

import asyncio
import datetime
import statistics
from typing import Any

import msgspec

_decode = msgspec.json.Decoder().decode


class Message(msgspec.Struct, frozen=True):
    stream: str
    seq: int
    time: float  # when JetStream stored it (seconds since the epoch)
    headers: dict
    body: Any


async def _read_stream(js: Any, stream: str, subject: str) -> list[Message]:
    info = await js.stream_info(stream)
    last = info.state.last_seq
    out: list[Message] = []
    if not last:
        return out
    sub = await js.subscribe(subject, ordered_consumer=True, deliver_policy="all")  # type: ignore[arg-type]
    try:
        while True:
            msg = await sub.next_msg(timeout=30)
            md = msg.metadata
            try:
                body = _decode(msg.data)
            except msgspec.DecodeError:
                body = None
            out.append(Message(stream, md.sequence.stream, md.timestamp.timestamp(), dict(msg.headers or {}), body))
            if md.sequence.stream >= last:
                return out
    finally:
        await sub.unsubscribe()


async def _read(url: str) -> tuple[list[Message], list[Message]]:
    import nats

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        return await _read_stream(js, "VCBUS_K8S", "vcbus.k8s.>"), await _read_stream(js, "VCBUS_CMDS", "vcbus.cmd.>")
    finally:
        await nc.close()


def read(url: str) -> tuple[list[Message], list[Message]]:
    """Every record of VCBUS_K8S and every command of VCBUS_CMDS on the server at `url`."""
    return asyncio.run(_read(url))


def _cmd_type(m: Message) -> str:
    return str(m.headers.get("ce-type", "")).removeprefix("sh.volcano.")


class _Job:
    """One job's marks as the bus shows them: per generation, per milestone, the times."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.gens: dict[str, list[str]] = {}  # pod name -> its uids in order
        self.gen_of: dict[str, int] = {}  # pod uid -> its generation
        self.podgroups: list[str] = []  # PodGroup uids in order
        self.seen: set[tuple[str, str]] = set()  # (uid, milestone) marked once
        self.failed: list[float] = []
        self.creates: dict[str, int] = {}  # pod name -> CreatePod commands so far
        self.marks: dict[int, dict[str, list[float]]] = {}

    def mark(self, gen: int, what: str, t: float, once: str = "") -> None:
        if once:
            if (once, what) in self.seen:
                return
            self.seen.add((once, what))
        self.marks.setdefault(gen, {}).setdefault(what, []).append(t)

    def record(self, m: Message) -> None:
        body = m.body if isinstance(m.body, dict) else {}
        obj = body.get("object") or {}
        kind = m.headers.get("Vcbus-Kind") or obj.get("kind")
        meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        uid, name = meta.get("uid"), meta.get("name")
        if kind == "Job" and self.start is None:
            self.start = m.time
        if not uid or not name:
            return
        if kind == "PodGroup":
            if uid not in self.podgroups:
                self.podgroups.append(uid)
            gen = self.podgroups.index(uid) + 1
            self.mark(gen, "pg_added", m.time, once=uid)
            if status.get("phase") == "Inqueue":
                self.mark(gen, "pg_inqueue", m.time, once=uid)
            return
        if kind != "Pod":
            return
        uids = self.gens.setdefault(name, [])
        if uid not in uids:
            uids.append(uid)
            self.gen_of[uid] = len(uids)
        gen = self.gen_of[uid]
        if body.get("type") == "ADDED":
            self.mark(gen, "added", m.time, once=uid)
        if spec.get("nodeName"):
            self.mark(gen, "bound", m.time, once=uid)
        if status.get("phase") == "Running":
            self.mark(gen, "running", m.time, once=uid)
        if status.get("phase") == "Failed" and (uid, "failed") not in self.seen:
            self.seen.add((uid, "failed"))
            self.failed.append(m.time)
        if body.get("type") == "DELETED":
            self.mark(gen + 1, "gone", m.time)

    def command(self, m: Message, seq_time: dict[int, float]) -> None:
        body, kind = m.body if isinstance(m.body, dict) else {}, _cmd_type(m)
        if kind == "cmd.pod.create.v1":
            name = body.get("name", "")
            self.creates[name] = self.creates.get(name, 0) + 1
            self.mark(self.creates[name], "create", m.time)
        elif kind == "cmd.podgroup.create.v1":
            self.mark(len(self.podgroups) + 1, "pg_create", m.time, once="pg_create")
        elif kind == "cmd.podgroup.status.v1" and (body.get("status") or {}).get("phase") == "Inqueue":
            self.mark(len(self.podgroups), "pg_inqueue_cmd", m.time, once=self.podgroups[-1] if self.podgroups else "-")
        elif kind == "cmd.pod.bind.v1" and (gen := self.gen_of.get(body.get("uid", ""))):
            self.mark(gen, "bind", m.time)
            cut = str(m.headers.get("ce-id", "")).split(":")
            if len(cut) > 1 and cut[1].isdigit() and int(cut[1]) in seq_time:
                self.mark(gen, "cut", seq_time[int(cut[1])])
        elif kind == "cmd.pod.delete.v1":
            self.mark(self.gen_of.get(body.get("uid", ""), 1) + 1, "delete", m.time)

    def t0(self, gen: int) -> float | None:
        """When generation `gen` began: the vcjob's first record, else the failure that restarted it."""
        if gen == 1:
            return self.start
        return self.failed[gen - 2] if len(self.failed) >= gen - 1 else None


def command_counts(commands: list[Message]) -> dict[str, int]:
    """Commands stored on VCBUS_CMDS by type (`cmd.pod.create.v1`: 2000, ...), most first."""
    counts: dict[str, int] = {}
    for m in commands:
        counts[_cmd_type(m)] = counts.get(_cmd_type(m), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _epoch(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    values = sorted(values)
    return {"p50": round(values[len(values) // 2], 2), "p90": round(values[int(len(values) * 0.9)], 2),
            "max": round(values[-1], 2), "n": len(values)}


def lags(records: list[Message]) -> dict[str, dict[str, float]]:
    """{"watch": quantiles, "publish": quantiles} of Pod records, in seconds: see the module's docstring."""
    watch: list[float] = []
    publish: list[float] = []
    for m in records:
        body = m.body if isinstance(m.body, dict) else {}
        obj = body.get("object") or {}
        if obj.get("kind") != "Pod" or (observed := _epoch(body.get("time"))) is None:
            continue
        publish.append(m.time - observed)
        created = _epoch((obj.get("metadata") or {}).get("creationTimestamp"))
        if body.get("type") == "ADDED" and created is not None:  # (a bind or a status patch leaves no such time)
            watch.append(observed - created)
    return {"watch": _quantiles(watch), "publish": _quantiles(publish)}


def milestones(records: list[Message], commands: list[Message]) -> dict[str, Any]:
    """{"gen1": {milestone: median seconds}, "gen2": ..., "commands": counts}: see the module's docstring."""
    seq_time = {m.seq: m.time for m in records}
    jobs: dict[str, _Job] = {}
    for m in sorted(records + commands, key=lambda m: m.time):
        if m.stream == "VCBUS_K8S":
            if key := m.headers.get("Vcbus-Job"):
                jobs.setdefault(key, _Job()).record(m)
        elif (j := jobs.get(str(m.headers.get("ce-subject", "")))) is not None:
            j.command(m, seq_time)

    out: dict[str, dict[str, list[float]]] = {}
    for j in jobs.values():
        for gen, marks in j.marks.items():
            t0 = j.t0(gen)
            if t0 is None or "added" not in marks:
                continue
            per = out.setdefault(f"gen{gen}", {})
            for what, ts in marks.items():
                if what.startswith("pg_"):
                    per.setdefault(what, []).append(min(ts) - t0)
                else:
                    per.setdefault(f"{what}_first", []).append(min(ts) - t0)
                    per.setdefault(f"{what}_last", []).append(max(ts) - t0)
    figures: dict[str, Any] = {
        gen: {k: round(statistics.median(v), 2) for k, v in sorted(per.items(), key=lambda kv: statistics.median(kv[1]))}
        for gen, per in sorted(out.items())}
    figures["commands"] = command_counts(commands)
    figures["lags"] = lags(records)
    return figures
