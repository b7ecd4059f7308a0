"""`vcbus.k8s.reach.reach` on the real API server behind a proxy that refuses connections at first:
each failed try logged with its wait (`vcbus.retries.REACH`), then reached, saying after how many."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.test_bridge import ResettingProxy
from vcbus import retries
from vcbus.k8s import reach as reaching

pytestmark = pytest.mark.k8s


async def test_reached_after_refused_tries_says_how_many(k8s, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="vcbus")
    monkeypatch.setattr(retries, "REACH", retries.Policy(0.05, 0.2))  # the same loop, shorter waits
    proxy = ResettingProxy(k8s.port)
    proxy.refusing = True
    try:
        api = k8s.api_client()
        api.configuration.host = f"https://127.0.0.1:{proxy.port}"
        task = asyncio.create_task(reaching.reach(api, timeout=120, stop=asyncio.Event()))
        async with asyncio.timeout(60):
            while sum("is not reachable" in r.getMessage() for r in caplog.records) < 2:
                await asyncio.sleep(0.02)
        proxy.restore()
        assert await asyncio.wait_for(task, 60) is True
    finally:
        await asyncio.to_thread(proxy.close)
    failed = [r for r in caplog.records if "is not reachable" in r.getMessage()]
    assert [r.args[2] for r in failed] == list(range(1, len(failed) + 1))  # try 1, 2, ... failed
    for r in failed:
        top = min(0.05 * 2 ** (r.args[2] - 1), 0.2)
        assert top / 2 <= r.args[3] < top, (r.args[2], r.args[3])
    said = [r.getMessage() for r in caplog.records if "is reachable after" in r.getMessage()]
    assert said == [f"vcbus up: the API server {api.configuration.host} is reachable after {len(failed)} failed tries"]
