"""A record with many outputs (a 10,000-pod job): pods rendered per batch, stored batch by batch.

Volcano's syncJob creates every missing pod of a job in one pass
(pkg/controllers/job/job_controller_actions.go), and so does the engine: the
record that makes a 10,000-pod job's PodGroup Inqueue decides 10,000 CreatePods
at once, each carrying its full pod manifest. Decisions stay exactly that (the
same commands, ids and bytes, in the same order); what this module bounds is
how the decider holds and stores them:

- **Pods are rendered when they are encoded, not when they are decided.** The
  decider wraps the engine's `render_pod` hook in a `LazyRenderer`
  (statemachines.manifests.lazy): a CreatePod's `pod` is then a `LazyPod` (the
  job's raw record, task, index, a frozen copy of the status, the forwarding
  flag: a few hundred bytes) and `encode` renders it while writing the message
  body, with msgspec's `enc_hook`. The bytes are the ones the eager renderer
  gives (tests/test_bigrecords.py compares them). A rendered pod, about 13 KB
  of Python objects for a 2.3 KB manifest, lives only while its own message is
  encoded.
- **A record with more outputs than `OUTPUT_BATCH` (1,000, the server's atomic
  batch limit) is stored in bounded batches.** Everything decided before it is
  stored and acked first; then its messages are built (rendered, encoded) and
  stored at most `OUTPUT_BATCH` at a time, each batch acknowledged by the server
  before the next one is built (one atomic batch each where the stream allows
  it). The record is acked only after all of them. Memory is O(batch) messages,
  not O(replicas).
- **Exactly once.** Each message keeps its `Nats-Msg-Id` `<seq>:<index>`. A
  crash part-way leaves the record unacked: the next run decides it again and
  stores it message by message (the record may have outputs stored already), and
  JetStream drops the ones it has. A session that fails part-way (the server
  away) restores the record's messages from the same lazy sequence
  (`vcbus.bus.flights.restore`), in bounded chunks too.

`split` is the decider's one way of turning a record's outputs into messages:
small records are materialized at once (`Split.lists`), as before.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import msgspec

from statemachines import outputs as o
from statemachines.manifests.lazy import LazyPod, LazyRenderer, lazy
from vcbus.bus import subjects as s
from vcbus.bus.batching import MAX_ATOMIC, BatchWriter, Stored
from vcbus.bus.cloudevents import headers as ce_headers
from vcbus.bus.cloudevents import output_id
from vcbus.bus.publisher import Prepared
from vcbus.observability import metrics

__all__ = ["LazyPod", "LazyRenderer", "lazy", "encode", "split", "store", "OUTPUT_BATCH"]
OUTPUT_BATCH = MAX_ATOMIC  # a record with more outputs than this is stored in batches of at most this many


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, LazyPod):
        return obj.value()
    raise NotImplementedError(f"cannot encode a {type(obj).__name__}")


_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


def encode(out: o.Output) -> bytes:
    """`statemachines.outputs.encoder.encode(out)`, rendering a lazy pod on the way."""
    return _encoder.encode(out)


class Messages(Sequence[Prepared]):
    """One stream's messages of a record, each built (pod rendered, body encoded) when read."""

    def __init__(self, seq: int, outs: list[o.Output], source: str) -> None:
        self.seq = seq
        self.outs = outs
        self.source = source
        self.picks: list[int] = []  # indexes in `outs`, in order
        self.subjects: list[str] = []
        self.extra: list[Prepared] = []  # built already (a `record.retried` event), after the rest

    def __len__(self) -> int:
        return len(self.picks) + len(self.extra)

    def _one(self, k: int) -> Prepared:
        n = len(self.picks)
        if k >= n:
            return self.extra[k - n]
        i = self.picks[k]
        out = self.outs[i]
        return Prepared(self.subjects[k], encode(out), ce_headers(out, ce_id=output_id(self.seq, i), source=self.source))

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self._one(j) for j in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        return self._one(k)

    def __iter__(self) -> Iterator[Prepared]:
        for k in range(len(self)):
            yield self._one(k)


class Split(Sequence[Prepared]):
    """A record's commands then events (what a flight sends, in that order), built lazily."""

    def __init__(self, commands: Messages, events: Messages) -> None:
        self.commands = commands
        self.events = events

    def __len__(self) -> int:
        return len(self.commands) + len(self.events)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        n = len(self.commands)
        if k < 0:
            k += len(self)
        return self.commands[k] if k < n else self.events[k - n]

    def __iter__(self) -> Iterator[Prepared]:
        yield from self.commands
        yield from self.events

    def big(self) -> bool:
        return len(self) > OUTPUT_BATCH

    def lists(self) -> tuple[list[Prepared], list[Prepared]]:
        return list(self.commands), list(self.events)


def split(seq: int, outs: list[o.Output], *, source: str, publish_commands: bool = True,
          skip_cluster: bool = False, count: bool = True) -> Split:
    """The messages of `outs` (decided by record `seq`): subjects now (a job key no subject can be
    built from fails here, before anything is sent), bodies when read. `skip_cluster`: outputs of
    `_/...` keys are another partition's to publish; `count`: /metrics vcbus_decisions_total."""
    commands, events = Messages(seq, outs, source), Messages(seq, outs, source)
    for i, out in enumerate(outs):
        if skip_cluster and out.job.startswith("_/"):
            continue  # queue-scoped outputs: with N > 1 partitions the queue role publishes them (vcbus.bus.queueing)
        command = o.is_command(out)
        if count:
            metrics.decided(out, command=command)
        if command:
            subject = s.command_subject(out.job)
            if publish_commands:
                commands.picks.append(i)
                commands.subjects.append(subject)
        else:
            events.picks.append(i)
            events.subjects.append(s.event_subject(out.job, o.tag_of(type(out))))
    return Split(commands, events)


async def store(writer: BatchWriter, messages: Split, *, atomic: bool, timeout: float,
                batch: int = OUTPUT_BATCH) -> Stored:
    """Store a big record's messages, commands then events, at most `batch` built and in flight at a
    time: each batch is acknowledged before the next one is built. Raises what a failed batch raises."""
    stored = duplicates = 0
    for stream in (messages.commands, messages.events):
        for start in range(0, len(stream), batch):
            for sent in await writer.send(stream[start:start + batch], atomic=atomic):
                res = await sent.wait(timeout)
                stored += res.stored
                duplicates += res.duplicates
    return Stored(stored, duplicates)
