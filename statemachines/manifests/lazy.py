"""Pod manifests rendered when they are encoded, not when they are decided.

A CreatePod carries its full pod manifest (about 2.3 KB of JSON, some 13 KB
as Python objects). Volcano's syncJob creates every missing pod of a job in one
pass, so the record that starts a 10,000-pod job decides 10,000 of them at
once; rendered eagerly they all live until the last is stored.
`LazyRenderer` wraps the engine's `render_pod` hook: the CreatePod's `pod` is
then a `LazyPod` (the job's raw record, task, index, a frozen copy of the
status, the forwarding flag: a few hundred bytes) that its consumer renders
when it encodes the command (`vcbus.bus.bigrecords.encode`, msgspec's
`enc_hook`), giving the bytes the eager hook gives. Pure: rendering is the
same function of the same inputs, only later.

Defined here, in the pure domain, because a decider's snapshot (a pickle of
the engine, vcbus.bus.statesnap) holds the last record's outputs and admits
only `statemachines` classes; the hook itself is re-attached by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from statemachines.model.status import JobStatus


class LazyPod:
    """A CreatePod's manifest, rendered only when the command is encoded (`value()`)."""

    __slots__ = ("renderer", "raw", "task", "index", "status", "forwarding")

    def __init__(self, renderer: LazyRenderer, raw: bytes, task: str, index: int, status: JobStatus,
                 forwarding: bool) -> None:
        self.renderer = renderer
        self.raw = raw
        self.task = task
        self.index = index
        self.status = status
        self.forwarding = forwarding

    def value(self) -> dict[str, Any]:
        return self.renderer.render(self.raw, self.task, self.index, self.status, job_forwarding=self.forwarding)


class LazyRenderer:
    """An engine `render_pod` hook that returns `LazyPod`s instead of manifests.

    It carries the wrapped hook's module and qualified name, so a decider's snapshot
    configuration names the same hook with it as without it. The status is frozen (a
    copy) once per status object the engine hands it, so a pod rendered later sees the
    status of its decision even if that object changed since."""

    def __init__(self, render: Callable[..., dict[str, Any]]) -> None:
        self.render = render
        self.__module__ = getattr(render, "__module__", "?")
        self.__qualname__ = getattr(render, "__qualname__", "?")
        self._status: JobStatus | None = None  # held, so its id is never another object's
        self._frozen: JobStatus | None = None

    def __call__(self, raw: bytes, task: str, index: int, status: JobStatus, *, job_forwarding: bool = False) -> Any:
        if status is not self._status:
            self._status = status
            self._frozen = msgspec.json.decode(msgspec.json.encode(status), type=JobStatus)
        assert self._frozen is not None
        return LazyPod(self, raw, task, index, self._frozen, job_forwarding)


def lazy(render: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """`render` wrapped in a `LazyRenderer` (once)."""
    if render is None or isinstance(render, LazyRenderer):
        return render
    return LazyRenderer(render)
