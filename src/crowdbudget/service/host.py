"""The campaigns a server process holds, and the one way a request reads or changes one.

:class:`Service` is the application's state (``app.state.service``): the event store, the
campaigns in memory (loaded on first use, least recently used evicted), a lock per campaign,
the credentials (:class:`~crowdbudget.service.credentials.Credentials`), the request limits
(:class:`~crowdbudget.service.limits.RequestLimits`), the bounded expensive work
(:class:`~crowdbudget.service.expensive.ExpensiveWork`) and the read cache.

Every request on a campaign runs through :meth:`Service.run` (from a worker thread) or
:meth:`Service.run_async` (on the event loop): both drive the same decision protocol
(:meth:`Service._decide`, a generator that yields the blocking steps it needs — take the
lock, load, catch up, wait for the commit, pause — and each driver performs them in its own
way), so the retries across processes exist once.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Generator, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from fastapi import HTTPException

from crowdbudget.campaign import Campaign, ConcurrentWriteError, EventStore
from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError
from crowdbudget.service.credentials import Credentials
from crowdbudget.service.expensive import ExpensiveWork
from crowdbudget.service.limits import RequestLimits
from crowdbudget.service.read_cache import ReadCache
from crowdbudget.service.settings import ServiceSettings
from crowdbudget.service.setup_probe import ComputePool

T = TypeVar("T")

#: how long a request keeps retrying lost races, or waits for its campaign's lock, before it
#: gives up (a store that is down, a campaign another request holds for too long): a request
#: is always answered, at worst 503 with ``Retry-After``, before clients and load balancers
#: give up on it (commonly after 30-60 s)
RETRY_SECONDS = 15.0
_CAMPAIGN_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")

# the blocking steps of the decision protocol (Service._decide), performed by its drivers
_ACQUIRE = "acquire"  # take the campaign's lock (subject: the lock and the deadline)
_LOAD = "load"  # load the campaign from the store (subject: its id; reply: the campaign)
_REFRESH = "refresh"  # catch up with the store (subject: the campaign; reply: events applied)
_DURABLE = "durable"  # wait until a commit ticket is settled (subject: the ticket)
_PAUSE = "pause"  # sleep (subject: seconds)
#: take a shared campaign's advisory lock up to the commit (subject: its id; reply: the
#: hold or None; :meth:`EventStore.hold_async`) — on the event loop's path only
_HOLD = "hold"

_Step = tuple[str, Any]

#: threads per process that load or catch up campaigns for coroutines (one per campaign at a
#: time: each works under its campaign's lock)
_STORE_THREADS = 8


class Service:
    """The state of one server process: campaigns stored at ``db_url`` and everything that
    serves them (see the module). ``clock``: seconds, for assignment expiries."""

    def __init__(
        self,
        db_url: str,
        clock: Callable[[], float] = time.time,
        settings: ServiceSettings | None = None,
    ) -> None:
        self.store = EventStore(db_url)
        self.clock = clock
        self.settings = settings or ServiceSettings()
        self.keys = Credentials(self.store, self.settings.operator_key)
        self.limits = RequestLimits(self.settings)
        self.expensive = ExpensiveWork(self.settings)
        self.reads = ReadCache(self.settings.read_cache_bytes)
        self._campaigns: OrderedDict[str, Campaign] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._jitter = random.Random()  # retry pauses only; never touches a decision
        # creations in this process one at a time, so two cannot both pass the quota check
        self._creating = threading.Lock()
        # threads that load or catch up a campaign for a coroutine holding its lock; not the
        # shared thread pool, where every thread may be a request blocked on that very lock
        # (a campaign's first decisions in a process run there): the holder would wait for a
        # thread that waits for the holder
        self._store_threads = ThreadPoolExecutor(
            _STORE_THREADS, thread_name_prefix="crowdbudget-store"
        )

    @property
    def compute(self) -> ComputePool:
        """The process's compute pool (shared by the apps built in one process)."""
        return self.expensive.pool

    def lock(self, campaign_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(campaign_id, threading.Lock())

    # ------------------------------------------------------------------ campaigns in memory
    def cached(self, campaign_id: str) -> Campaign | None:
        """The campaign's in-memory copy, marked most recently used, or None (also when the
        copy :attr:`~Campaign.diverged`: it is dropped, and the caller reloads the campaign)."""
        campaign = self._campaigns.get(campaign_id)
        if campaign is not None and campaign.diverged:
            del self._campaigns[campaign_id]
            return None
        if campaign is not None:
            self._campaigns.move_to_end(campaign_id)
        return campaign

    def campaign(self, campaign_id: str) -> Campaign:
        """The campaign (loaded from the store if not in memory); 404 if there is none."""
        campaign = self.cached(campaign_id)
        if campaign is None:
            if not _CAMPAIGN_ID.fullmatch(campaign_id):
                raise HTTPException(404, "no such campaign")
            try:
                campaign = Campaign.load(self.store, campaign_id, clock=self.clock)
            except CrowdBudgetError:
                raise HTTPException(404, f"no campaign {campaign_id!r}") from None
            self.remember(campaign)
        return campaign

    def remember(self, campaign: Campaign) -> None:
        """Hold ``campaign`` in memory, evicting the least recently used copies beyond
        ``max_campaigns_in_memory`` campaigns or ``max_items_in_memory`` items in all (a copy
        in use — its lock held, or events of it not yet committed — stays, and so does the
        one just remembered; an evicted copy is reloaded from the store when next needed)."""
        self._campaigns[campaign.campaign_id] = campaign
        self._campaigns.move_to_end(campaign.campaign_id)
        limits = self.settings
        excess = len(self._campaigns) - limits.max_campaigns_in_memory
        excess_items = sum(len(c.item_ids) for c in self._campaigns.values())
        excess_items -= limits.max_items_in_memory
        for campaign_id in list(self._campaigns)[:-1]:
            if excess <= 0 and excess_items <= 0:
                break
            lock = self.lock(campaign_id)
            if not lock.acquire(blocking=False):
                continue
            try:
                candidate = self._campaigns.get(campaign_id)
                if candidate is not None and (candidate.can_refresh() or candidate.diverged):
                    del self._campaigns[campaign_id]
                    excess -= 1
                    excess_items -= len(candidate.item_ids)
            finally:
                lock.release()

    # ------------------------------------------------------------------ running requests
    def _decide(
        self, campaign_id: str, action: Callable[[Campaign], T], read: bool
    ) -> Generator[_Step, Any, T]:
        """Run ``action`` on the campaign under its lock, then make what it changed durable
        before returning (nothing is acknowledged before it is committed). A generator of the
        blocking steps it needs (see the module); :meth:`run` and :meth:`run_async` drive it.

        Group commit: the action's events are applied at once and staged; the lock is
        released before the commit, so concurrent requests share one transaction (one fsync)
        instead of queueing behind each other's. The wait covers everything this campaign
        object staged so far, so even a request that wrote nothing (a repeated label, a
        status read) never reports a change that is not yet durable.

        Several processes (decisions serialised per campaign by an event-version check with
        retry): a decision's events carry the next version numbers of this copy; if another
        process appended meanwhile, the primary key refuses them, the copy (now
        :attr:`Campaign.diverged`) is dropped and reloaded, and the request is decided again
        — no read of the store is spent on a request that writes. An answer that wrote
        nothing (a refusal, a held assignment handed out again, no work) cannot be checked
        that way, so it is checked against the store before it is given: the copy catches up
        (one indexed read, usually empty) and, if the store had news, the request runs again
        on the current state. Reads (``read=True``) catch up first. So every answer includes
        everything acknowledged before the request arrived, whichever process acknowledged
        it. A copy never catches up while events it staged are uncommitted (they may lose
        their numbers to the other process's events; :meth:`Campaign.can_refresh`): the
        request then waits for them and tries again.
        """
        # every lost race means another process committed an event, so the system as a
        # whole progresses; a jittered, growing pause keeps two busy processes from
        # colliding in lock step. Give up only after a deadline (a store that is down).
        deadline = time.monotonic() + RETRY_SECONDS
        pause = 0.001
        catch_up = read
        while True:
            refusal: CrowdBudgetError | None = None
            lock = self.lock(campaign_id)
            yield _ACQUIRE, (lock, deadline)
            hold = None  # a shared campaign's advisory lock, up to the commit (EventStore)
            try:
                hold = yield _HOLD, campaign_id
                campaign = self.cached(campaign_id)
                if campaign is None:
                    campaign = yield _LOAD, campaign_id
                # a campaign another process writes to: catch up before every decision
                shared = self.store.shared(campaign_id)
                caught_up = (catch_up or shared) and campaign.can_refresh()
                if caught_up:
                    yield _REFRESH, campaign
                before = campaign.durability_ticket()
                try:
                    with campaign.deferred_durability():
                        result = action(campaign)
                except CrowdBudgetError as error:
                    refusal = error
                ticket = campaign.durability_ticket()
                # an answer that wrote nothing (e.g. refused on this process's view of an
                # assignment another process handed out): run again if the store has news,
                # else the answer stands
                retry_now = False
                if (
                    (refusal is not None or ticket is before)
                    and not caught_up
                    and time.monotonic() <= deadline
                ):
                    if campaign.can_refresh():
                        retry_now = (yield _REFRESH, campaign) > 0
                    else:  # wait for this copy's own staged events, then catch up
                        retry_now = catch_up = True
            except BaseException:
                self.store.release(hold)
                raise
            finally:
                lock.release()
            try:
                yield _DURABLE, ticket
            except CrowdBudgetError as error:
                self.store.release(hold)
                hold = None
                # the copy holds events the store refused: drop it (if it is still cached)
                yield _ACQUIRE, (lock, deadline)
                try:
                    if self._campaigns.get(campaign_id) is campaign:
                        del self._campaigns[campaign_id]
                finally:
                    lock.release()
                if not isinstance(error, ConcurrentWriteError) or time.monotonic() > deadline:
                    raise
                yield _PAUSE, pause * (0.5 + self._jitter.random())
                pause = min(pause * 2, 0.05)
                continue
            finally:
                self.store.release(hold)
            if retry_now:
                continue
            if refusal is not None:
                raise refusal
            return result

    def run(self, campaign_id: str, action: Callable[[Campaign], T], *, read: bool = False) -> T:
        """:meth:`_decide` from a worker thread (blocking steps block this thread)."""
        steps = self._decide(campaign_id, action, read)
        reply: Any = None
        failure: Exception | None = None
        try:
            while True:
                finished, step = _advance(steps, reply, failure)
                if finished:
                    return step
                try:
                    reply, failure = self._perform(*step), None
                except Exception as error:
                    reply, failure = None, error
        finally:
            steps.close()

    def _perform(self, kind: str, subject: Any) -> Any:
        """One step of :meth:`_decide`, blocking."""
        if kind == _ACQUIRE:
            lock, deadline = subject
            if not lock.acquire(timeout=max(deadline - time.monotonic(), 0.001)):
                raise campaign_busy()
            return None
        if kind == _LOAD:
            return self.campaign(subject)
        if kind == _REFRESH:
            return subject.refresh()
        if kind == _DURABLE:
            return self.store.wait(subject)
        if kind == _HOLD:
            return None  # a thread's request decides without the advisory lock (it retries)
        return time.sleep(subject)

    async def run_async(self, campaign_id: str, action: Callable[[Campaign], T]) -> T:
        """:meth:`_decide` (a write) on the event loop, for the hot endpoints (next
        assignment, label, cancel): no thread-pool hop per request, and the commit is
        awaited (:meth:`EventStore.wait_async`) instead of parking a thread per request.

        ``action`` must be cheap (it runs on the loop while other requests wait). The
        campaign lock is a thread lock shared with the requests that run in threads, so it
        is taken without blocking the loop (:func:`acquire_without_blocking`); loading a
        campaign or catching up with the store reads the database in a worker thread, with
        the lock held. Same retries and the same guarantee as :meth:`run`."""
        steps = self._decide(campaign_id, action, False)
        reply: Any = None
        failure: Exception | None = None
        try:
            while True:
                finished, step = _advance(steps, reply, failure)
                if finished:
                    return step
                try:
                    reply, failure = await self._perform_async(*step), None
                except Exception as error:
                    reply, failure = None, error
        finally:
            steps.close()  # a cancelled request releases the lock it holds

    async def _perform_async(self, kind: str, subject: Any) -> Any:
        """One step of :meth:`_decide`, without blocking the event loop."""
        if kind == _ACQUIRE:
            return await acquire_without_blocking(*subject)
        if kind == _LOAD:
            return await self._in_store_thread(self.campaign, subject)
        if kind == _REFRESH:
            return await self._in_store_thread(subject.refresh)
        if kind == _DURABLE:
            return await self.store.wait_async(subject)
        if kind == _HOLD:
            return await self.store.hold_async(subject)
        return await asyncio.sleep(subject)

    async def _in_store_thread(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in one of the store threads, awaited; a cancelled caller
        still waits for it to finish (it works on a campaign under the caller's lock, which
        is released only after it), as Starlette's thread pool does."""
        future = asyncio.get_running_loop().run_in_executor(self._store_threads, function, *args)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            await asyncio.wait([future])
            raise

    def cached_read(
        self,
        campaign_id: str,
        endpoint: str,
        parameters: tuple[Hashable, ...],
        compute: Callable[[Campaign], bytes],
        *,
        expire_first: bool = False,
    ) -> bytes:
        """The encoded answer ``compute`` gives on the campaign, computed once per event
        count (:class:`ReadCache`, keyed by ``endpoint`` and its ``parameters``).

        Runs as a read (:meth:`run`: caught up with the store first). ``expire_first``: the
        answer depends on the clock through expiries (status), so overdue assignments are
        released (events) before the count is read. An answer is kept only once :meth:`run`
        returned, i.e. once every event the state it saw holds is committed: a copy whose
        staged event lost its number to another process never leaves an answer for a count
        the store gives to another event."""
        key = (campaign_id, endpoint, parameters)

        def read(campaign: Campaign) -> tuple[int, bytes, bool]:
            if expire_first:
                campaign.expire_overdue()
            count = campaign.event_count
            kept = self.reads.get(key, count)
            if kept is not None:
                return count, kept, False
            return count, compute(campaign), True

        count, answer, fresh = self.run(campaign_id, read, read=True)
        if fresh:
            self.reads.put(key, count, answer)
        return answer

    # ------------------------------------------------------------------ creating campaigns
    def check_campaign_quota(self, creator: str) -> None:
        """Refuse a new campaign beyond ``max_campaigns`` in the store or
        ``max_campaigns_per_key`` created by ``creator`` (an operator key's hash, or
        :data:`~crowdbudget.service.credentials.ANYONE`). Several processes creating at the
        same instant may each pass: the quota can then be exceeded by at most one campaign
        per further process."""
        limits = self.settings
        n_total = len(self.store.campaign_ids())
        if n_total >= limits.max_campaigns:
            raise InvalidParameterError(
                f"this server holds {n_total} campaigns, its limit (max_campaigns "
                f"{limits.max_campaigns}); no more can be created"
            )
        n_mine = self.keys.created_by(creator)
        if n_mine >= limits.max_campaigns_per_key:
            raise InvalidParameterError(
                f"this key has created {n_mine} campaigns, this server's limit per key "
                f"(max_campaigns_per_key {limits.max_campaigns_per_key})"
            )

    def create_campaign(self, config: dict[str, Any], creator: str) -> Campaign:
        """:meth:`Campaign.create` with ``config``, held in memory and counted against
        ``creator``'s quota (checked again here, with this process's creations serialised)."""
        with self._creating:
            self.check_campaign_quota(creator)
            campaign = Campaign.create(**config, store=self.store, clock=self.clock)
            self.keys.record_creator(campaign.campaign_id, creator)
        with self.lock(campaign.campaign_id):
            self.remember(campaign)
        return campaign


def _advance(
    steps: Generator[_Step, Any, T], reply: Any, failure: Exception | None
) -> tuple[bool, Any]:
    """Resume ``steps`` with ``reply`` (or raise ``failure`` in it): ``(True, its result)``
    once it returned, else ``(False, the next step)``."""
    try:
        step = steps.send(reply) if failure is None else steps.throw(failure)
    except StopIteration as done:
        return True, done.value
    return False, step


def campaign_busy() -> HTTPException:
    """503 with ``Retry-After``: the campaign's lock was not free within the request's
    deadline (:data:`RETRY_SECONDS`); nothing was done."""
    return HTTPException(
        503,
        f"the campaign is busy (its lock was not free within {RETRY_SECONDS:g} s); retry",
        headers={"Retry-After": "1"},
    )


async def acquire_without_blocking(lock: threading.Lock, deadline: float) -> None:
    """Take a thread lock from the event loop without blocking it: the lock is held only
    for short stretches (an action, or a read in a worker thread), so poll with a short,
    growing pause; give up at ``deadline`` (``time.monotonic``) with :func:`campaign_busy`.
    Cancellation-safe: nothing is acquired on behalf of a cancelled task."""
    pause = 0.0002
    while not lock.acquire(blocking=False):
        if time.monotonic() >= deadline:
            raise campaign_busy()
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.005)
