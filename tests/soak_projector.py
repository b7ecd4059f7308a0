"""The projector alone in a process of its own, for the soak test: its RSS after each run until idle.

    python -m tests.soak_projector NATS_URL [--keep]

Runs `Projector.run(until_idle=True)`, prints `rss <kB> position <seq> jobs <n>`,
then waits for a line on stdin and runs again (the same projector, so the
second figure is the growth of one long-running loop), until stdin closes.
`--keep` turns eviction off (the old behaviour), to see what the test guards.
"""

from __future__ import annotations

import asyncio
import gc
import sys

from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import Projector
from vcbus.settings import BusSettings


def rss_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


async def main(url: str, keep: bool) -> None:
    async with open_bus(BusSettings(nats_url=url)) as bus:
        projector = Projector(bus)
        projector.views.evict = not keep
        loop = asyncio.get_running_loop()
        while True:
            await projector.run(until_idle=True)
            gc.collect()
            views = projector.views
            print(f"rss {rss_kb()} position {views.position} jobs {len(views.history.jobs)}", flush=True)
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], "--keep" in sys.argv[2:]))
