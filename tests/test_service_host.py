"""The service's one decision protocol (``Service._decide``) under its two drivers: the
thread driver (``Service.run``) and the event-loop driver (``Service.run_async``) give the
same answers, raise the same refusals, and never leave a campaign's lock held — also when
a request is cancelled while it waits for the lock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from crowdbudget.campaign import Campaign
from crowdbudget.exceptions import InvalidParameterError
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
