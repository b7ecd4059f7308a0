"""How often the interpreter hands the GIL to another thread, for `vcbus up`.

`vcbus up` runs everything in one process: the event loop bridges, decides, schedules and
projects, while the actuator's threads send the API calls (`vcbus.k8s.actuating`), each a few
steps that each need the GIL again after a socket wait. A thread that wants the GIL waits for
the thread holding it to let go; a thread that computes lets go only every switch interval
(Python's default, 5 ms). Under a burst the loop computes for seconds, so each step of each call
waits up to 5 ms, and a call of a few milliseconds of work took 95-145 ms.

`SWITCH_INTERVAL` (1 ms) is what `vcbus up` sets, measured on this project's two-core machine with
a CPU-bound main thread and 32 threads sending GETs to a real kube-apiserver through
`vcbus.k8s.rawcalls` (three interleaved rounds of 4 s each, the machine loaded): 213-266 calls a
second at 5 ms, 242-396 at 1 ms, 267-417 at 0.5 ms, with the main thread's own work unchanged
(its loop counts within the rounds' spread). 1 ms takes most of the gain; below it the
interpreter switches more often for little more.

`VCBUS_SWITCH_INTERVAL` (seconds, e.g. `0.005` for Python's default) overrides it.
"""

from __future__ import annotations

import os
import sys

from vcbus.errors import UserError

SWITCH_INTERVAL = 0.001  # seconds
ENV = "VCBUS_SWITCH_INTERVAL"
LIMITS = (1e-6, 1.0)  # what is accepted: a microsecond to a second


def configure(environ: dict[str, str] | None = None) -> float:
    """Set the interpreter's switch interval (`VCBUS_SWITCH_INTERVAL`, else `SWITCH_INTERVAL`); returns it."""
    raw = (os.environ if environ is None else environ).get(ENV, "").strip()
    interval = SWITCH_INTERVAL
    if raw:
        try:
            interval = float(raw)
        except ValueError:
            raise UserError(f"{ENV}={raw!r}: expected seconds, e.g. 0.001") from None
        if not LIMITS[0] <= interval <= LIMITS[1]:
            raise UserError(f"{ENV}={raw}: expected {LIMITS[0]:g} to {LIMITS[1]:g} seconds")
    sys.setswitchinterval(interval)
    return interval
