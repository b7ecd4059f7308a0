"""The watcher thread's wake-up of the bridge's loop (vcbus.k8s.bridge.Doorbell): one per wait, never lost."""

from __future__ import annotations

import asyncio
import queue
import threading

from vcbus.k8s.bridge import Doorbell


async def test_a_burst_rings_once_per_wait_and_no_item_is_left_unseen(monkeypatch):
    """A thread queues 20,000 items and rings after each, as a watcher does; the consumer takes what is
    there, arms the bell and looks once more before it waits. Every item is taken, and the loop is
    woken a handful of times, not once per item (the real loop's call_soon_threadsafe, counted by a
    spy around it)."""
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    bell = Doorbell(loop, wake)
    calls = 0
    real = loop.call_soon_threadsafe

    def counted(*args, **kwargs):
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    items: queue.Queue[int] = queue.Queue()
    n = 20_000

    def produce() -> None:
        for i in range(n):
            items.put(i)
            bell.ring()

    thread = threading.Thread(target=produce)
    thread.start()
    taken = []
    while len(taken) < n:
        wake.clear()
        try:
            taken.append(items.get_nowait())
            continue
        except queue.Empty:
            bell.arm()
        try:
            taken.append(items.get_nowait())
            continue
        except queue.Empty:
            pass
        await asyncio.wait_for(wake.wait(), 60)
    thread.join()
    assert taken == list(range(n))
    assert 1 <= calls < n // 10, calls


async def test_an_unarmed_bell_stays_quiet_and_an_armed_one_rings_once():
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    bell = Doorbell(loop, wake)
    bell.ring()  # armed at the start: the loop has not looked yet
    await asyncio.wait_for(wake.wait(), 10)
    wake.clear()
    thread = threading.Thread(target=lambda: [bell.ring() for _ in range(100)])
    thread.start()
    thread.join()
    await asyncio.sleep(0)
    assert not wake.is_set()  # not armed: the loop is taking items, no need to wake it
    bell.arm()
    threading.Thread(target=bell.ring).start()
    await asyncio.wait_for(wake.wait(), 10)
