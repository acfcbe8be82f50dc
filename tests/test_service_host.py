"""The service's one decision protocol (``Service._decide``) under its two drivers: the
thread driver (``Service.run``) and the event-loop driver (``Service.run_async``) give the
same answers, raise the same refusals, and never leave a campaign's lock held — also when
a request is cancelled while it waits for the lock."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import anyio
import pytest
from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool

from crowdbudget.campaign import Campaign
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.service import host
from crowdbudget.service.host import Service


def _service_with_campaign(tmp_path: Path) -> tuple[Service, str]:
    service = Service(f"sqlite:///{tmp_path / 'host.db'}")
    campaign = service.create_campaign({"items": ["a", "b"], "budget": 4}, "anyone")
    return service, campaign.campaign_id


def test_both_drivers_answer_alike_and_release_the_lock_on_a_refusal(tmp_path: Path) -> None:
    service, cid = _service_with_campaign(tmp_path)

    def refuse(_: Campaign) -> None:
        raise InvalidParameterError("refused")

    with pytest.raises(InvalidParameterError, match="refused"):
        service.run(cid, refuse)
    with pytest.raises(InvalidParameterError, match="refused"):
        asyncio.run(service.run_async(cid, refuse))
    assert not service.lock(cid).locked()
    service.run(cid, lambda c: c.add_workers(["w1"]))
    asyncio.run(service.run_async(cid, lambda c: c.add_workers(["w2"])))
    assert service.run(cid, lambda c: list(c.worker_ids), read=True) == ["w1", "w2"]
    assert asyncio.run(service.run_async(cid, lambda c: list(c.worker_ids))) == ["w1", "w2"]
    # what both wrote is in the store: a fresh process's copy holds it
    again = Service(service.store.url)
    assert again.run(cid, lambda c: list(c.worker_ids), read=True) == ["w1", "w2"]
    service.store.dispose()
    again.store.dispose()


def test_a_request_cancelled_while_it_waits_for_the_lock_takes_nothing(tmp_path: Path) -> None:
    service, cid = _service_with_campaign(tmp_path)
    lock = service.lock(cid)

    async def cancelled_while_waiting() -> None:
        lock.acquire()  # another request holds the campaign
        task = asyncio.ensure_future(service.run_async(cid, lambda c: c.add_workers(["late"])))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        lock.release()

    asyncio.run(cancelled_while_waiting())
    assert not lock.locked()
    assert service.run(cid, lambda c: list(c.worker_ids), read=True) == []
    service.store.dispose()


def test_a_request_that_cannot_get_the_lock_in_time_is_answered_503(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock wait has a deadline: the request is answered (503, Retry-After) instead of
    waiting for as long as another request holds the campaign."""
    monkeypatch.setattr(host, "RETRY_SECONDS", 0.2)
    service, cid = _service_with_campaign(tmp_path)
    lock = service.lock(cid)
    lock.acquire()  # another request holds the campaign
    try:
        for attempt in (
            lambda: service.run(cid, lambda c: c.add_workers(["late"])),
            lambda: asyncio.run(service.run_async(cid, lambda c: c.add_workers(["late"]))),
        ):
            started = time.monotonic()
            with pytest.raises(HTTPException) as refused:
                attempt()
            assert refused.value.status_code == 503
            assert (refused.value.headers or {}).get("Retry-After") == "1"
            assert time.monotonic() - started < 5
    finally:
        lock.release()
    assert service.run(cid, lambda c: list(c.worker_ids), read=True) == []  # nothing done
    service.store.dispose()


def test_a_coroutine_holding_a_campaign_loads_it_while_the_thread_pool_is_full(
    tmp_path: Path,
) -> None:
    """The coroutine that holds a campaign's lock loads the campaign in the store's own
    threads: with every thread of the shared pool taken (here by one blocked call; in a
    server, by requests waiting for that very lock) it still finishes."""
    service, cid = _service_with_campaign(tmp_path)
    fresh = Service(service.store.url)  # nothing in memory: the request must load it
    release = threading.Event()

    async def scenario() -> list[str]:
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = 1
        blocker = asyncio.ensure_future(run_in_threadpool(release.wait, 30))
        await asyncio.sleep(0.05)  # the one pooled thread is taken
        try:
            return await asyncio.wait_for(
                fresh.run_async(cid, lambda c: list(c.item_ids)), timeout=10
            )
        finally:
            release.set()
            await blocker

    assert asyncio.run(scenario()) == ["a", "b"]
    service.store.dispose()
    fresh.store.dispose()
