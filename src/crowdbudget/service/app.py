"""The HTTP service for live campaigns (FastAPI): a thin shell over :class:`Campaign`.

All routes live under ``/v1``; the OpenAPI schema is at ``/openapi.json`` and interactive docs
at ``/docs`` (Swagger UI) and ``/redoc``, served from the installed ``fastapi-offline``
package (no CDN: they work offline). Access:

- the **operator key** (given to ``crowdbudget serve``, :class:`ServiceSettings`) creates and
  lists campaigns; without one, anyone who reaches the server may create campaigns, so
  ``serve`` then binds only to loopback;
- creating a campaign returns its **requester key** (full control: items, worker tokens,
  status, results, export, pending assignments, cancel, settings, gold labels and the
  calibration on them; rotate it with
  ``POST /v1/campaigns/{id}/requester-key``);
- the requester issues **worker tokens** (``POST /v1/campaigns/{id}/workers``); a worker token
  can only ask for work and answer or cancel its own assignments;
- keys travel in the ``Authorization: Bearer <key>`` header. They are random 256-bit tokens,
  stored only as SHA-256 hashes (a fast hash is enough for keys of that entropy; there is
  nothing to brute-force). A missing key gets 401, a wrong key 403; neither changes anything.
  A revoked key stops working at once in this process and within
  ``_KEY_RECHECK_SECONDS`` in other processes on the same database.

Hostile input (the service faces the internet): request bodies are parsed by strict models
(unknown fields, a boolean where a number belongs, NaN: 422); every size a client can send is
bounded by :class:`ServiceSettings` (body bytes, items per request, id and label length,
classes); a policy parameter that configures the server (a cache directory, a grid size) is
refused by name (:func:`crowdbudget.registry.check_network_policy`), and so is a parameter
that sets work beyond the server's ceiling (a verdict's ``n-iter``, ``n-restarts``, ``tol``:
:func:`crowdbudget.registry.check_network_verdict`); a policy whose declared cost on the
campaign's size exceeds ``max_policy_cost`` is refused at creation. Expensive work runs in
child processes under a deadline and a memory ceiling, a bounded number at once
(:mod:`crowdbudget.service.setup_probe`): a campaign's set-up and first decision are tried
there before anything is stored, aggregator verdicts (``…/results``, ``…/calibration``) are
fitted there; a client that leaves kills its child, and a full pool answers 503 with
``Retry-After`` at once. A campaign's first decision in this process runs in a worker thread,
not on the event loop.
A refused request changes nothing: campaigns validate an event before they store it.

Errors are always JSON ``{"detail": "<one line: what is wrong and what is allowed>"}`` and
never echo more than a short prefix of the input: 401/403 keys, 404 unknown campaign or
assignment (or no gold to calibrate on), 409 an assignment that cannot take the request
(expired, cancelled, already answered differently, another worker's), 413 a body over the
limit, 422 malformed input, 503 an expensive computation that found the server busy (with
``Retry-After``) or ran past its deadline or memory ceiling, 500 (with no detail) a fault of
the server.

Consistency: one lock per campaign serialises its requests in this process; every accepted
change is in the event store before the response is sent. Several processes on one database
give the answers of one (an event-version check with retry, :meth:`Service.run`): an append
that loses the race (the event table's primary key makes each event number unique) is decided
again on a reloaded copy, and an answer that wrote nothing is checked against the events
other processes appended before it is given.
"""

import asyncio
import base64
import hashlib
import hmac
import math
import random
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources
from typing import Annotated, Any, TypeVar

import sqlalchemy as sa
from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import request_response
from starlette.staticfiles import StaticFiles

from crowdbudget.campaign import (
    AssignmentError,
    Campaign,
    ConcurrentWriteError,
    EventStore,
    PendingAssignment,
    UnknownAssignmentError,
)
from crowdbudget.campaign.store import create_tables
from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError
from crowdbudget.registry import check_network_policy, check_network_verdict
from crowdbudget.service.guards import KeyRateLimiter, RequestGuard, clip_detail
from crowdbudget.service.read_cache import ReadCache
from crowdbudget.service.schemas import (
    AssignmentOut,
    CampaignCreate,
    CampaignCreated,
    CampaignSettingsUpdate,
    GoldLabel,
    ItemsAdd,
    LabelSubmit,
    RequesterKey,
    RequestT,
    TeamPush,
    WorkerCreate,
    WorkerRevoked,
    WorkerToken,
    assignment_out,
)
from crowdbudget.service.settings import ServiceSettings
from crowdbudget.service.setup_probe import (
    ComputeBusyError,
    ComputeTimeoutError,
    check_setup,
    compute_pool,
)

T = TypeVar("T")

DASHBOARD_HTML = resources.files("crowdbudget.service").joinpath("dashboard.html").read_text()

_RETRY_SECONDS = 15.0  # how long a write keeps retrying lost races before it gives up
_KEY_RECHECK_SECONDS = 2.0  # a cached key is looked up again after this long (revocations)
_MAX_CACHED_KEYS = 100_000
_CAMPAIGN_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_DISCONNECT_POLL_SECONDS = 0.25  # how often a request waiting on a child checks its client
_VERDICT_ATTEMPTS = 3  # fits of one verdict read while items keep being added
#: the routes whose request body is CSV (``text/csv``); every other body is JSON
_CSV_BODY_PATHS = re.compile(r"/v1/campaigns/[^/]+/(items/csv|labels/import)")

_CREDENTIALS = sa.Table(
    "credentials",
    sa.MetaData(),
    sa.Column("key_hash", sa.String(64), primary_key=True),
    sa.Column("campaign_id", sa.String(64), nullable=False, index=True),
    sa.Column("role", sa.String(16), nullable=False),  # requester | worker
    sa.Column("worker_id", sa.String(200), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

#: who created each campaign (for the per-key quota): the SHA-256 of the operator key, or
#: :data:`_ANYONE` on a server without one; the same metadata as the credentials
_CREATORS = sa.Table(
    "campaign_creators",
    _CREDENTIALS.metadata,
    sa.Column("campaign_id", sa.String(64), primary_key=True),
    sa.Column("creator", sa.String(64), nullable=False, index=True),
    sa.Column("created_at", sa.Float, nullable=False),
)
_ANYONE = "anyone"


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _content_security_policy(html: str) -> str:
    """A CSP allowing exactly the page's own inline ``<script>`` and ``<style>`` blocks (by
    their SHA-256) and requests to this server; nothing may frame the page."""

    def hashes(tag: str) -> str:
        blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.DOTALL)
        return " ".join(
            "'sha256-" + base64.b64encode(hashlib.sha256(b.encode()).digest()).decode() + "'"
            for b in blocks
        )

    return (
        f"default-src 'none'; script-src {hashes('script')}; style-src {hashes('style')}; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )


DASHBOARD_CSP = _content_security_policy(DASHBOARD_HTML)


# ---------------------------------------------------------------------------------- the app
class Service:
    """Campaigns in memory (loaded on first use, least recently used evicted), their locks,
    and the credential table."""

    def __init__(
        self,
        db_url: str,
        clock: Callable[[], float] = time.time,
        settings: ServiceSettings | None = None,
    ) -> None:
        self.store = EventStore(db_url)
        create_tables(self.store.engine, _CREDENTIALS.metadata)
        self.clock = clock
        self.settings = settings or ServiceSettings()
        self._campaigns: OrderedDict[str, Campaign] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        # key hash -> (campaign, role, worker, when it was last read from the database)
        self._key_cache: dict[str, tuple[str, str, str | None, float]] = {}
        self._jitter = random.Random()  # retry pauses only; never touches a decision
        #: child processes for set-ups and verdict fits (setup_probe.py)
        self.compute = compute_pool(self.settings.max_compute_jobs)
        #: campaigns that made a decision in this process (their first ran off the loop)
        self.decided: set[str] = set()
        # creations in this process one at a time, so two cannot both pass the quota check
        self._creating = threading.Lock()
        self.reads = ReadCache(self.settings.read_cache_bytes)

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

    def forget(self, campaign_id: str, campaign: Campaign) -> None:
        """Drop ``campaign`` from the cache (if it is still the cached copy): its state holds
        events that did not reach the store; the next request reloads it."""
        with self.lock(campaign_id):
            if self._campaigns.get(campaign_id) is campaign:
                del self._campaigns[campaign_id]

    # ------------------------------------------------------------------ running requests
    def run(self, campaign_id: str, action: Callable[[Campaign], T], *, read: bool = False) -> T:
        """Run ``action`` on the campaign under its lock, then make what it changed durable
        before returning (nothing is acknowledged before it is committed).

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
        deadline = time.monotonic() + _RETRY_SECONDS
        pause = 0.001
        catch_up = read
        while True:
            refusal: CrowdBudgetError | None = None
            with self.lock(campaign_id):
                campaign = self.campaign(campaign_id)
                caught_up = (catch_up or self.store.shared(campaign_id)) and campaign.can_refresh()
                if caught_up:
                    campaign.refresh()
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
                        retry_now = campaign.refresh() > 0
                    else:
                        retry_now = catch_up = True
            try:
                campaign.wait_durable(ticket)
            except CrowdBudgetError as error:
                self.forget(campaign_id, campaign)
                if not isinstance(error, ConcurrentWriteError) or time.monotonic() > deadline:
                    raise
                time.sleep(pause * (0.5 + self._jitter.random()))
                pause = min(pause * 2, 0.05)
                continue
            if retry_now:
                continue
            if refusal is not None:
                raise refusal
            return result

    async def run_async(self, campaign_id: str, action: Callable[[Campaign], T]) -> T:
        """:meth:`run` (a write) on the event loop, for the hot endpoints (next assignment,
        label, cancel): no thread-pool hop per request, and the commit is awaited
        (:meth:`EventStore.wait_async`) instead of parking a thread per request.

        ``action`` must be cheap (it runs on the loop while other requests wait). The
        campaign lock is a thread lock shared with the endpoints that still run in threads,
        so it is taken without blocking the loop (:meth:`_acquire`); loading a campaign or
        catching up with the store reads the database in a worker thread, with the lock
        held. Same retries and the same guarantee as :meth:`run`: the result is returned
        only once everything this campaign copy staged is durable."""
        deadline = time.monotonic() + _RETRY_SECONDS
        pause = 0.001
        catch_up = False
        while True:
            refusal: CrowdBudgetError | None = None
            lock = self.lock(campaign_id)
            await _acquire(lock)
            hold = None  # a shared campaign's advisory lock, up to the commit (EventStore)
            try:
                hold = await self.store.hold_async(campaign_id)
                campaign = self.cached(campaign_id)
                if campaign is None:
                    campaign = await run_in_threadpool(self.campaign, campaign_id)
                caught_up = (catch_up or self.store.shared(campaign_id)) and campaign.can_refresh()
                if caught_up:
                    await run_in_threadpool(campaign.refresh)
                before = campaign.durability_ticket()
                try:
                    with campaign.deferred_durability():
                        result = action(campaign)
                except CrowdBudgetError as error:
                    refusal = error
                ticket = campaign.durability_ticket()
                retry_now = False
                # an answer that wrote nothing is checked against the store (see run)
                if (
                    (refusal is not None or ticket is before)
                    and not caught_up
                    and time.monotonic() <= deadline
                ):
                    if campaign.can_refresh():
                        retry_now = await run_in_threadpool(campaign.refresh) > 0
                    else:  # wait for this copy's own staged events, then catch up
                        retry_now = catch_up = True
            except BaseException:
                self.store.release(hold)
                raise
            finally:
                lock.release()
            try:
                await self.store.wait_async(ticket)
            except CrowdBudgetError as error:
                self.store.release(hold)
                hold = None
                await _acquire(lock)
                try:
                    if self._campaigns.get(campaign_id) is campaign:
                        del self._campaigns[campaign_id]
                finally:
                    lock.release()
                if not isinstance(error, ConcurrentWriteError) or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(pause * (0.5 + self._jitter.random()))
                pause = min(pause * 2, 0.05)
                continue
            finally:
                self.store.release(hold)
            if retry_now:
                continue
            if refusal is not None:
                raise refusal
            return result

    def cached_read(
        self,
        campaign_id: str,
        endpoint: str,
        parameters: tuple[Any, ...],
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

    # ------------------------------------------------------------------ keys
    def add_key(self, campaign_id: str, role: str, worker_id: str | None = None) -> str:
        key = secrets.token_urlsafe(32)
        with self.store.engine.begin() as conn:
            conn.execute(
                _CREDENTIALS.insert().values(
                    key_hash=_hash(key),
                    campaign_id=campaign_id,
                    role=role,
                    worker_id=worker_id,
                    created_at=time.time(),
                )
            )
        return key

    def revoke_keys(self, campaign_id: str, role: str, worker_id: str | None = None) -> int:
        """Delete the campaign's keys of ``role`` (of one worker, for workers); returns how
        many. They stop working at once here, within ``_KEY_RECHECK_SECONDS`` elsewhere."""
        where = [_CREDENTIALS.c.campaign_id == campaign_id, _CREDENTIALS.c.role == role]
        if worker_id is not None:
            where.append(_CREDENTIALS.c.worker_id == worker_id)
        with self.store.engine.begin() as conn:
            n = conn.execute(_CREDENTIALS.delete().where(*where)).rowcount
        for digest, (owner, owner_role, owner_worker, _) in list(self._key_cache.items()):
            if (
                owner == campaign_id
                and owner_role == role
                and (worker_id is None or owner_worker == worker_id)
            ):
                self._key_cache.pop(digest, None)
        return int(n)

    def rotate_requester_key(self, campaign_id: str) -> str:
        """A new requester key; the old ones stop working."""
        self.revoke_keys(campaign_id, "requester")
        return self.add_key(campaign_id, "requester")

    async def who_async(self, campaign_id: str, key: str) -> tuple[str, str | None] | None:
        """:meth:`who` for the request path: a key read recently is answered on the event
        loop (a dict look-up: no thread-pool hop per request); a miss, or a key last read
        more than ``_KEY_RECHECK_SECONDS`` ago (it may have been revoked by another
        process), asks the database in a worker thread."""
        cached = self._key_cache.get(_hash(key))
        if cached is None or time.monotonic() - cached[3] > _KEY_RECHECK_SECONDS:
            return await run_in_threadpool(self.who, campaign_id, key)
        owner, role, worker_id, _ = cached
        return (role, worker_id) if owner == campaign_id else None

    def who(self, campaign_id: str, key: str) -> tuple[str, str | None] | None:
        """The role (and worker id) of ``key`` on the campaign, or None."""
        digest = _hash(key)
        cached = self._key_cache.get(digest)
        if cached is None or time.monotonic() - cached[3] > _KEY_RECHECK_SECONDS:
            query = sa.select(_CREDENTIALS).where(_CREDENTIALS.c.key_hash == digest)
            with self.store.engine.connect() as conn:
                row = conn.execute(query).first()
            if row is None:
                self._key_cache.pop(digest, None)
                return None
            if len(self._key_cache) >= _MAX_CACHED_KEYS:
                self._key_cache.clear()  # rare; the keys in use are read again
            cached = (row.campaign_id, row.role, row.worker_id, time.monotonic())
            self._key_cache[digest] = cached
        owner, role, worker_id, _ = cached
        return (role, worker_id) if owner == campaign_id else None

    def is_operator(self, key: str) -> bool:
        operator_key = self.settings.operator_key
        return operator_key is not None and hmac.compare_digest(_hash(key), _hash(operator_key))

    def campaigns_of(self, key: str) -> list[str]:
        query = sa.select(_CREDENTIALS.c.campaign_id).where(
            _CREDENTIALS.c.key_hash == _hash(key), _CREDENTIALS.c.role == "requester"
        )
        with self.store.engine.connect() as conn:
            return [row.campaign_id for row in conn.execute(query)]

    # ------------------------------------------------------------------ expensive work
    def check_setup(self, config: dict[str, Any]) -> None:
        """A campaign's configuration against the policy cost limit, then its set-up and
        first decision tried in a child process (:func:`setup_probe.check_setup`)."""
        limits = self.settings
        check_setup(
            config,
            limits.setup_timeout,
            pool=self.compute,
            memory=limits.compute_memory_bytes,
            max_cost=limits.max_policy_cost,
        )

    @property
    def retry_after(self) -> float:
        """Seconds a request refused by a busy compute pool is told to wait: half a job's
        deadline (a slot frees by then on average), at least one."""
        return max(1.0, self.settings.compute_timeout / 2)

    async def computed(self, request: Request, job: str, payload: Any) -> Any:
        """``job`` run in a child process (:meth:`ComputePool.run`) under the server's
        deadline and memory ceiling, from a worker thread; the child is killed when the
        client disconnects or the request is cancelled (shutdown)."""
        token = object()
        limits = self.settings
        retry_after = self.retry_after
        task = asyncio.ensure_future(
            run_in_threadpool(
                self.compute.run,
                job,
                payload,
                timeout=limits.compute_timeout,
                memory=limits.compute_memory_bytes,
                token=token,
                retry_after=retry_after,
            )
        )
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=_DISCONNECT_POLL_SECONDS)
                if done:
                    return task.result()
                if await request.is_disconnected():
                    self.compute.cancel(token)
                    raise ComputeTimeoutError("the client left; its computation was cancelled")
        except asyncio.CancelledError:
            self.compute.cancel(token)
            raise

    async def verdict_read(
        self,
        request: Request,
        campaign_id: str,
        endpoint: str,
        verdict: str | None,
        parameters: tuple[Any, ...],
        compose: Callable[[Campaign, Any], bytes],
    ) -> bytes:
        """The encoded answer ``compose(campaign, fitted)`` gives, with the verdict fitted in
        a child process (``fitted``: labels and probabilities; None for the policy's own
        model, computed in place), kept in the read cache like :meth:`cached_read`'s. A fit
        covers the labels of the event count it started at: the answer is kept only if the
        campaign is still at that count when it is composed, and items added meanwhile make
        the fit stale (it is fitted again)."""
        if verdict is not None:
            check_network_verdict(verdict)
        key = (campaign_id, endpoint, parameters)
        for _ in range(_VERDICT_ATTEMPTS):

            def prepare(c: Campaign) -> tuple[int, bytes | None, Any]:
                count = c.event_count
                kept = self.reads.get(key, count)
                return count, kept, None if kept is not None else c.verdict_fit_input(verdict)

            count, kept, fit_input = await run_in_threadpool(
                self.run, campaign_id, prepare, read=True
            )
            if kept is not None:
                return kept
            fitted = None
            if fit_input is not None:
                self.compute.refuse_if_busy(self.retry_after)  # before pickling the labels
                fitted = await self.computed(request, "verdict", fit_input)

            def action(c: Campaign, fitted: Any = fitted) -> tuple[int, bytes | None]:
                if fitted is not None and fitted[0].shape[0] != len(c.item_ids):
                    return c.event_count, None  # items were added meanwhile
                return c.event_count, compose(c, fitted)

            now, answer = await run_in_threadpool(self.run, campaign_id, action, read=True)
            if answer is not None:
                if now == count:
                    self.reads.put(key, count, answer)
                return answer
        raise ComputeBusyError("this campaign's items keep changing; try again", 1.0)

    # ------------------------------------------------------------------ quotas
    def check_campaign_quota(self, creator: str) -> None:
        """Refuse a new campaign beyond ``max_campaigns`` in the store or
        ``max_campaigns_per_key`` created by ``creator`` (see :data:`_CREATORS`). Several
        processes creating at the same instant may each pass: the quota can then be exceeded
        by at most one campaign per further process."""
        limits = self.settings
        n_total = len(self.store.campaign_ids())
        if n_total >= limits.max_campaigns:
            raise InvalidParameterError(
                f"this server holds {n_total} campaigns, its limit (max_campaigns "
                f"{limits.max_campaigns}); no more can be created"
            )
        query = sa.select(sa.func.count()).where(_CREATORS.c.creator == creator)
        with self.store.engine.connect() as conn:
            n_mine = int(conn.execute(query).scalar_one())
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
            with self.store.engine.begin() as conn:
                conn.execute(
                    _CREATORS.insert().values(
                        campaign_id=campaign.campaign_id, creator=creator, created_at=time.time()
                    )
                )
        with self.lock(campaign.campaign_id):
            self.remember(campaign)
        return campaign

    def check_item_quota(self, n_items: int) -> None:
        """Refuse a campaign of more than ``max_items_per_campaign`` items."""
        limit = self.settings.max_items_per_campaign
        if n_items > limit:
            raise InvalidParameterError(
                f"a campaign of {n_items} items; this server allows at most {limit} items per "
                "campaign (max_items_per_campaign)"
            )

    # ------------------------------------------------------------------ limits
    def check_ids(self, values: list[str], what: str) -> None:
        """Refuse more ids than one request may carry, or an id over the length limit."""
        limits = self.settings
        if len(values) > limits.max_items_per_request:
            raise InvalidParameterError(
                f"{len(values)} {what}s in one request; this server takes at most "
                f"{limits.max_items_per_request} (add the rest in further requests)"
            )
        longest = max((len(v) for v in values), default=0)
        if longest > limits.max_id_length:
            raise InvalidParameterError(
                f"a {what} id of {longest} characters; this server takes at most "
                f"{limits.max_id_length}"
            )


_NULL = b"null"


def _encoded(value: Any) -> bytes:
    """``value`` as the JSON body FastAPI would send for it."""
    return bytes(JSONResponse(jsonable_encoder(value)).body)


async def _acquire(lock: threading.Lock) -> None:
    """Take a thread lock from the event loop without blocking it: the lock is held only
    for short stretches (an action, or a read in a worker thread), so poll with a short,
    growing pause. Cancellation-safe: nothing is acquired on behalf of a cancelled task."""
    pause = 0.0002
    while not lock.acquire(blocking=False):
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.005)


def _assignment_json(a: PendingAssignment, status_code: int = 200) -> JSONResponse:
    """The :class:`AssignmentOut` body built directly (the hot endpoints skip FastAPI's
    pydantic validation and serialization of the response; the schema stays declared)."""
    return JSONResponse(
        {
            "assignment_id": a.assignment_id,
            "item_id": a.item_id,
            "worker_id": a.worker_id,
            "price": a.price,
            "expires_at": a.expires_at,
            "status": a.status,
            "label": a.label,
        },
        status_code=status_code,
    )


def _bind_directly(
    app: FastAPI, endpoint: Callable[..., Any], handler: Callable[[Request], Any]
) -> None:
    """Serve ``endpoint``'s route with ``handler``, which binds the arguments itself and
    calls ``endpoint``. FastAPI still documents the route from ``endpoint``'s signature (the
    OpenAPI schema is unchanged); only its generic per-request machinery (dependency solver,
    body model validation) is skipped. Measured on the two hot endpoints: about 0.1-0.2 ms of
    server CPU per round trip, a sixth of the whole."""
    for route in app.router.routes:
        if isinstance(route, APIRoute) and route.endpoint is endpoint:
            route.app = request_response(handler)
            return
    raise LookupError(f"no route for {endpoint.__name__}")


async def _json_body(request: Request, model: type[RequestT]) -> RequestT:
    """The request body validated into ``model``, errors reported as FastAPI reports them
    (422 through the app's :class:`RequestValidationError` handler)."""
    try:
        return model.model_validate_json(await request.body())
    except ValidationError as error:
        problems = [
            {**problem, "loc": ("body", *problem.get("loc", ()))} for problem in error.errors()
        ]
        raise RequestValidationError(problems) from None


def _bearer(authorization: str | None) -> str:
    if not authorization:
        raise HTTPException(401, "missing key: send 'Authorization: Bearer <key>'")
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise HTTPException(401, "malformed Authorization header; expected 'Bearer <key>'")
    return key.strip()


def create_app(
    db_url: str = "sqlite:///crowdbudget.db",
    clock: Callable[[], float] = time.time,
    settings: ServiceSettings | None = None,
) -> FastAPI:
    """The FastAPI application serving campaigns stored at ``db_url``, under ``settings``
    (default :class:`ServiceSettings`: no operator key, the default limits)."""
    from crowdbudget import __version__

    service = Service(db_url, clock, settings)
    limits = service.settings

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        service.compute.start()
        yield
        # shutdown (uvicorn on SIGTERM / SIGINT): every acknowledged event is already
        # committed, so this kills the children still computing, drains the committer
        # thread and closes the connections
        service.compute.stop()
        service.store.dispose()

    app = FastAPI(
        title="crowdbudget",
        version=__version__,
        description="Budget-optimal crowdsourced labeling: live campaigns.",
        lifespan=lifespan,
        docs_url=None,  # served below from the installed package, not a CDN
        redoc_url=None,
    )
    app.state.service = service
    app.add_middleware(
        RequestGuard,
        max_body_bytes=limits.max_body_bytes,
        rate_limiter=KeyRateLimiter(
            limits.requests_per_second_per_key, limits.request_burst_per_key
        ),
        csv_paths=_CSV_BODY_PATHS,
    )

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        """One line naming the first bad field and what is allowed (the input itself is not
        echoed: it may not even be valid JSON, e.g. NaN)."""
        problems = error.errors()
        first = problems[0] if problems else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        detail = f"{where or 'body'}: {first.get('msg', 'invalid')}{more}"
        return JSONResponse({"detail": clip_detail(detail)}, status_code=422)

    @app.exception_handler(CrowdBudgetError)
    async def _crowdbudget_error(_: Request, error: CrowdBudgetError) -> JSONResponse:
        if isinstance(error, ComputeBusyError):
            return JSONResponse(
                {"detail": clip_detail(str(error))},
                status_code=503,
                headers={"retry-after": str(math.ceil(error.retry_after))},
            )
        if isinstance(error, ComputeTimeoutError):
            return JSONResponse({"detail": clip_detail(str(error))}, status_code=503)
        if isinstance(error, UnknownAssignmentError):
            status = 404
        elif isinstance(error, AssignmentError | ConcurrentWriteError):
            status = 409
        else:
            status = 422
        return JSONResponse({"detail": clip_detail(str(error))}, status_code=status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            {"detail": clip_detail(str(error.detail))},
            status_code=error.status_code,
            headers=getattr(error, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _server_error(_: Request, error: Exception) -> JSONResponse:
        """A fault of the server: JSON like every other answer, and nothing about the
        internals (the traceback goes to the server's log)."""
        return JSONResponse({"detail": "internal server error"}, status_code=500)

    Auth = Annotated[str | None, Header()]

    # The key checks are coroutines: FastAPI runs a plain ``def`` dependency in the thread
    # pool, one extra hop per request; a cached key needs none (see ``who_async``).
    async def operator(authorization: Auth = None) -> str:
        """Who creates: the operator key's SHA-256 (``_ANYONE`` on a server without one)."""
        if limits.operator_key is None:
            return _ANYONE  # no operator key: serve binds to loopback only (crowdbudget serve)
        key = _bearer(authorization)
        if not service.is_operator(key):
            raise HTTPException(403, "this key is not the operator key of this server")
        return _hash(key)

    async def requester(campaign_id: str, authorization: Auth = None) -> None:
        key = _bearer(authorization)
        found = await service.who_async(campaign_id, key)
        if found is None or found[0] != "requester":
            raise HTTPException(403, "this key is not the requester key of this campaign")

    async def requester_or_operator(campaign_id: str, authorization: Auth = None) -> None:
        key = _bearer(authorization)
        if service.is_operator(key):
            return
        found = await service.who_async(campaign_id, key)
        if found is None or found[0] != "requester":
            raise HTTPException(403, "this key is neither the requester key nor the operator key")

    async def worker(campaign_id: str, authorization: Auth = None) -> str:
        key = _bearer(authorization)
        found = await service.who_async(campaign_id, key)
        if found is None or found[0] != "worker" or found[1] is None:
            raise HTTPException(403, "this key is not a worker token of this campaign")
        return found[1]

    async def anyone(campaign_id: str, authorization: Auth = None) -> tuple[str, str | None]:
        key = _bearer(authorization)
        found = await service.who_async(campaign_id, key)
        if found is None:
            raise HTTPException(403, "this key gives no access to this campaign")
        return found

    OperatorDep = Annotated[str, Depends(operator)]
    RequesterDep = Annotated[None, Depends(requester)]
    WorkerDep = Annotated[str, Depends(worker)]

    # the label round trip's two routes are registered first: routes are matched in order,
    # and these two carry almost all the traffic
    @app.post(
        "/v1/campaigns/{campaign_id}/assignments",
        response_model=AssignmentOut,
        responses={204: {"description": "no work for this worker now"}},
    )
    async def next_assignment(campaign_id: str, worker_id: WorkerDep) -> Response:
        """The next item for the calling worker, or 204 when there is none. A worker who
        holds as many unanswered assignments as the campaign allows gets the oldest of them
        again (a response lost on the way is not lost work)."""
        if campaign_id in service.decided:
            assignment = await service.run_async(
                campaign_id, lambda c: c.next_assignment(worker_id)
            )
        else:  # a campaign's first decision may build a graph or a table: off the loop
            assignment = await run_in_threadpool(
                service.run, campaign_id, lambda c: c.next_assignment(worker_id)
            )
            service.decided.add(campaign_id)
        if assignment is None:
            return Response(status_code=204)
        return _assignment_json(assignment)

    @app.post(
        "/v1/campaigns/{campaign_id}/assignments/{assignment_id}/label",
        response_model=AssignmentOut,
    )
    async def submit_label(
        campaign_id: str, assignment_id: str, body: LabelSubmit, worker_id: WorkerDep
    ) -> Response:
        """Answer one's own assignment (idempotent for the same label)."""
        if len(body.label) > limits.max_id_length:
            raise InvalidParameterError(
                f"a label of {len(body.label)} characters; this server takes at most "
                f"{limits.max_id_length}"
            )
        assignment = await service.run_async(
            campaign_id, lambda c: c.record_label(assignment_id, body.label, worker_id=worker_id)
        )
        return _assignment_json(assignment)

    # the two requests of every label round trip bind their arguments by hand (see
    # _bind_directly) and then call the functions above, which still do the work and whose
    # signatures still make the OpenAPI schema
    async def next_assignment_direct(request: Request) -> Response:
        campaign_id = request.path_params["campaign_id"]
        worker_id = await worker(campaign_id, request.headers.get("authorization"))
        return await next_assignment(campaign_id, worker_id)

    async def submit_label_direct(request: Request) -> Response:
        campaign_id = request.path_params["campaign_id"]
        worker_id = await worker(campaign_id, request.headers.get("authorization"))
        body = await _json_body(request, LabelSubmit)
        return await submit_label(
            campaign_id, request.path_params["assignment_id"], body, worker_id
        )

    _bind_directly(app, next_assignment, next_assignment_direct)
    _bind_directly(app, submit_label, submit_label_direct)

    def _checked_features(features: list[list[float]] | None) -> list[list[float]] | None:
        if features and max(len(row) for row in features) > limits.max_features:
            raise InvalidParameterError(
                f"more than {limits.max_features} features per item; this server's limit"
            )
        return features

    def _campaign_config(body: CampaignCreate) -> dict[str, Any]:
        """The arguments of :meth:`Campaign.create`, checked against the server's limits
        (the server's defaults filled in where the request leaves a setting out)."""
        service.check_ids(body.items, "item")
        service.check_item_quota(len(body.items))
        if len(body.classes) > limits.max_classes:
            raise InvalidParameterError(
                f"{len(body.classes)} classes; this server takes at most {limits.max_classes}"
            )
        if max((len(c) for c in body.classes), default=0) > limits.max_id_length:
            raise InvalidParameterError(
                f"a class name is longer than this server's limit of {limits.max_id_length}"
            )
        service.check_ids(list(body.worker_prices), "worker")
        service.check_ids(list(body.worker_capacities), "worker")
        service.check_ids(body.workers, "worker")
        if body.pairs is not None:
            service.check_ids([i for i, _ in body.pairs], "pair")
            service.check_ids(list({w for _, w in body.pairs}), "worker")
        if len(body.policy) > limits.max_policy_length:
            raise InvalidParameterError(
                f"the policy id is longer than this server's limit of {limits.max_policy_length}"
            )
        check_network_policy(body.policy)
        if body.verdict is not None:
            check_network_verdict(body.verdict)
        ttl = limits.default_ttl if body.ttl is None else body.ttl
        if ttl is not None and ttl > limits.max_ttl:
            raise InvalidParameterError(
                f"ttl must be at most {limits.max_ttl:g} s on this server, got {body.ttl:g}"
            )
        pending = body.max_pending_per_worker or limits.default_max_pending_per_worker
        if pending > limits.max_pending_per_worker:
            raise InvalidParameterError(
                f"max_pending_per_worker must be at most {limits.max_pending_per_worker} on "
                f"this server, got {pending}"
            )
        return {
            "items": body.items,
            "budget": body.budget,
            "classes": body.classes,
            "policy": body.policy,
            "prior": body.prior,
            "worker_prices": body.worker_prices,
            "worker_capacities": body.worker_capacities,
            "default_price": body.default_price,
            "ttl": ttl,
            "seed": body.seed,
            "name": body.name,
            "max_labels_per_item": body.max_labels_per_item,
            "max_pending_per_worker": pending,
            "verdict": body.verdict,
            "workers": body.workers,
            "mode": body.mode,
            "contexts": body.contexts,
            "features": _checked_features(body.features),
            "pairs": None if body.pairs is None else [list(pair) for pair in body.pairs],
        }

    @app.post("/v1/campaigns", response_model=CampaignCreated, status_code=201)
    def create_campaign(body: CampaignCreate, creator: OperatorDep) -> CampaignCreated:
        """Create a campaign (needs the operator key when the server has one); the response
        holds its requester key (shown once). The policy's set-up is tried first under the
        server's time limit; nothing is stored unless the whole configuration works and the
        server's campaign quotas (per server, per operator key) leave room."""
        config = _campaign_config(body)
        service.check_campaign_quota(creator)  # before the set-up's cost, and again after
        service.check_setup(config)
        campaign = service.create_campaign(config, creator)
        key = service.add_key(campaign.campaign_id, "requester")
        return CampaignCreated(campaign_id=campaign.campaign_id, requester_key=key)

    @app.get("/v1/campaigns")
    def list_campaigns(
        authorization: Auth = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> list[dict[str, Any]]:
        """With the operator key: every campaign's id (``limit``/``offset`` pages through
        them). With a requester key: the status of the campaigns it controls."""
        key = _bearer(authorization)
        if service.is_operator(key):
            ids = service.store.campaign_ids()[offset : offset + limit]
            return [{"campaign_id": cid} for cid in ids]
        ids = service.campaigns_of(key)
        if not ids:
            raise HTTPException(403, "this key is neither the operator key nor a requester key")
        return [service.run(cid, lambda c: c.status(), read=True) for cid in ids]

    @app.patch("/v1/campaigns/{campaign_id}", status_code=204)
    def update_settings(
        campaign_id: str, body: CampaignSettingsUpdate, _: RequesterDep
    ) -> Response:
        """Change the time-to-live or the pending assignments a worker may hold (they apply
        to assignments handed out from now on)."""
        if body.ttl is not None and body.ttl > limits.max_ttl:
            raise InvalidParameterError(f"ttl must be at most {limits.max_ttl:g} s on this server")
        pending = body.max_pending_per_worker
        if pending is not None and pending > limits.max_pending_per_worker:
            raise InvalidParameterError(
                f"max_pending_per_worker must be at most {limits.max_pending_per_worker} on "
                "this server"
            )
        service.run(
            campaign_id,
            lambda c: c.update_settings(ttl=body.ttl, max_pending_per_worker=pending),
        )
        return Response(status_code=204)

    @app.post("/v1/campaigns/{campaign_id}/requester-key", response_model=RequesterKey)
    def rotate_requester_key(
        campaign_id: str, _: Annotated[None, Depends(requester_or_operator)]
    ) -> RequesterKey:
        """A new requester key (shown once); every earlier requester key stops working."""
        service.campaign(campaign_id)
        key = service.rotate_requester_key(campaign_id)
        return RequesterKey(campaign_id=campaign_id, requester_key=key)

    @app.post("/v1/campaigns/{campaign_id}/items", status_code=204)
    def add_items(campaign_id: str, body: ItemsAdd, _: RequesterDep) -> Response:
        """Add items (with their contexts and features when the campaign has them)."""
        _add_items(campaign_id, body.items, body.contexts, body.features)
        return Response(status_code=204)

    @app.post("/v1/campaigns/{campaign_id}/items/csv", status_code=204)
    async def add_items_csv(campaign_id: str, request: Request, _: RequesterDep) -> Response:
        """Add items from a CSV body, for large feature matrices: a column ``item``, an
        optional integer column ``context``, and every other column a feature (in order)."""
        import io

        import pandas as pd

        body = (await request.body()).decode("utf-8", errors="replace")
        try:
            frame = pd.read_csv(io.StringIO(body), dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError):
            raise HTTPException(422, "body is not a CSV with a column 'item'") from None
        frame.columns = [str(c).strip() for c in frame.columns]
        if "item" not in frame.columns:
            raise InvalidParameterError("the CSV needs a column 'item' (then 'context', features)")
        items = frame["item"].tolist()
        contexts = None
        if "context" in frame.columns:
            try:
                contexts = [int(c) for c in frame["context"]]
            except ValueError:
                raise InvalidParameterError("column 'context' must hold integers >= 0") from None
        columns = [c for c in frame.columns if c not in ("item", "context")]
        features = None
        if columns:
            try:
                features = frame[columns].astype(float).to_numpy().tolist()
            except ValueError:
                raise InvalidParameterError(
                    f"feature columns must hold numbers: {', '.join(columns[:5])}"
                ) from None
        await run_in_threadpool(_add_items, campaign_id, items, contexts, features)
        return Response(status_code=204)

    def _add_items(
        campaign_id: str,
        items: list[str],
        contexts: list[int] | None,
        features: list[list[float]] | None,
    ) -> None:
        service.check_ids(items, "item")
        features = _checked_features(features)

        def grown(c: Campaign) -> dict[str, Any]:
            assert c.config is not None
            config = c.config.to_payload()
            config.pop("campaign_id")
            service.check_item_quota(len(c.item_ids) + len(items))
            grown = {**config, "items": [*c.item_ids, *items]}
            for name, have, given in (
                ("contexts", c._item_contexts, contexts),
                ("features", c._item_features, features),
            ):
                if (have is None) != (given is None):
                    missing = "have" if have is not None else "have no"
                    raise InvalidParameterError(f"this campaign's items {missing} {name}")
                if have is not None and given is not None:
                    grown[name] = [*have, *given]
            return grown

        def add(c: Campaign) -> None:
            # checked again under the lock: another request may have added items meanwhile
            service.check_item_quota(len(c.item_ids) + len(items))
            c.add_items(items, contexts=contexts, features=features)

        # the set-up on the larger problem is tried first, outside the campaign's lock
        config = service.run(campaign_id, grown, read=True)
        service.check_setup(config)
        service.run(campaign_id, add)

    @app.post("/v1/campaigns/{campaign_id}/workers", response_model=WorkerToken, status_code=201)
    def add_worker(campaign_id: str, body: WorkerCreate, _: RequesterDep) -> WorkerToken:
        """Issue a token for a worker (a worker may hold several tokens); the worker joins
        the campaign (a ``workers_added`` event) if new to it."""
        service.check_ids([body.worker_id], "worker")
        service.run(campaign_id, lambda c: c.add_workers([body.worker_id]))
        token = service.add_key(campaign_id, "worker", body.worker_id)
        return WorkerToken(worker_id=body.worker_id, worker_token=token)

    @app.post(
        "/v1/campaigns/{campaign_id}/workers/{worker_id}/rotate",
        response_model=WorkerToken,
        status_code=201,
    )
    def rotate_worker_token(campaign_id: str, worker_id: str, _: RequesterDep) -> WorkerToken:
        """A new token for the worker; their earlier tokens stop working (their pending
        assignments stay theirs)."""
        service.check_ids([worker_id], "worker")
        service.campaign(campaign_id)
        service.revoke_keys(campaign_id, "worker", worker_id)
        token = service.add_key(campaign_id, "worker", worker_id)
        return WorkerToken(worker_id=worker_id, worker_token=token)

    @app.delete("/v1/campaigns/{campaign_id}/workers/{worker_id}", response_model=WorkerRevoked)
    def revoke_worker(campaign_id: str, worker_id: str, _: RequesterDep) -> WorkerRevoked:
        """Revoke every token of the worker and cancel their pending assignments (the
        budget they held returns at once); their answered labels stay."""
        service.check_ids([worker_id], "worker")
        service.campaign(campaign_id)
        revoked = service.revoke_keys(campaign_id, "worker", worker_id)

        def cancel_all(c: Campaign) -> int:
            pending = c.pending_assignments(worker_id)
            for a in pending:
                c.cancel_assignment(a.assignment_id)
            return len(pending)

        cancelled = service.run(campaign_id, cancel_all)
        return WorkerRevoked(
            worker_id=worker_id, revoked_tokens=revoked, cancelled_assignments=cancelled
        )

    @app.get("/v1/campaigns/{campaign_id}/assignments", response_model=list[AssignmentOut])
    def pending_assignments(
        campaign_id: str,
        _: RequesterDep,
        worker_id: Annotated[str | None, Query(max_length=200)] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    ) -> list[AssignmentOut]:
        """The unanswered assignments (of one worker, or all, oldest first per worker; at
        most ``limit``); cancel any with ``POST …/assignments/{id}/cancel``."""
        pending = service.run(campaign_id, lambda c: c.pending_assignments(worker_id), read=True)
        return [assignment_out(a) for a in pending[:limit]]

    @app.post("/v1/campaigns/{campaign_id}/assignments/{assignment_id}/cancel", status_code=204)
    async def cancel(
        campaign_id: str,
        assignment_id: str,
        who: Annotated[tuple[str, str | None], Depends(anyone)],
    ) -> Response:
        role, worker_id = who
        await service.run_async(
            campaign_id,
            lambda c: c.cancel_assignment(
                assignment_id, worker_id=worker_id if role == "worker" else None
            ),
        )
        return Response(status_code=204)

    @app.get(
        "/v1/campaigns/{campaign_id}/assignments/{assignment_id}", response_model=AssignmentOut
    )
    def get_assignment(
        campaign_id: str,
        assignment_id: str,
        who: Annotated[tuple[str, str | None], Depends(anyone)],
    ) -> AssignmentOut:
        role, worker_id = who
        assignment = service.run(campaign_id, lambda c: c.assignment(assignment_id), read=True)
        if role == "worker" and assignment.worker_id != worker_id:
            raise HTTPException(403, "this assignment belongs to another worker")
        return assignment_out(assignment)

    @app.post("/v1/campaigns/{campaign_id}/push", response_model=list[AssignmentOut])
    def push(campaign_id: str, body: TeamPush, _: RequesterDep) -> list[AssignmentOut]:
        """Push mode. With ``count`` (a campaign created with ``mode: push``): up to that many
        assignments whose workers the policy chose; the requester dispatches each to its
        worker. With ``worker_ids`` (a managed team, any campaign): one assignment per listed
        worker, in turn, while work is available (workers with nothing left, or holding as
        many unanswered assignments as the campaign allows, are skipped)."""
        if (body.worker_ids is None) == (body.count is None):
            raise InvalidParameterError(
                "give either 'count' (the policy picks the workers) or 'worker_ids'"
            )
        if body.count is not None:
            count = body.count
            assignments = service.run(campaign_id, lambda c: c.push_assignments(count))
        else:
            team = body.worker_ids or []
            service.check_ids(team, "worker")
            assignments = service.run(campaign_id, lambda c: c.next_assignments(team))
        return [assignment_out(a) for a in assignments]

    @app.post("/v1/campaigns/{campaign_id}/labels/import")
    async def import_labels(campaign_id: str, request: Request, _: RequesterDep) -> dict[str, int]:
        """Labels collected elsewhere, as crowd-kit's CSV ``task,worker,label`` in the body;
        they inform the posterior and the results and cost nothing from the budget."""
        import io

        import pandas as pd

        body = (await request.body()).decode("utf-8", errors="replace")
        try:
            frame = pd.read_csv(io.StringIO(body), dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError):
            raise HTTPException(422, "body is not a CSV with columns task,worker,label") from None
        frame.columns = [str(c).strip().lower() for c in frame.columns]
        if len(frame) > limits.max_items_per_request:
            raise InvalidParameterError(
                f"{len(frame)} labels in one request; this server takes at most "
                f"{limits.max_items_per_request}"
            )
        for column in ("worker", "label"):
            if column in frame.columns and frame[column].str.len().max() > limits.max_id_length:
                raise InvalidParameterError(
                    f"a {column} of more than {limits.max_id_length} characters"
                )
        n = await run_in_threadpool(service.run, campaign_id, lambda c: c.import_labels(frame))
        return {"imported": n}

    @app.get("/v1/campaigns/{campaign_id}/status", response_model=dict[str, Any])
    def status(campaign_id: str, _: RequesterDep) -> Response:
        """Spending and progress: spent, committed, remaining, pending, labels, estimated
        accuracy, whether the policy stopped (``Campaign.status``). Computed once per event
        count (overdue assignments are released first)."""
        answer = service.cached_read(
            campaign_id, "status", (), lambda c: _encoded(c.status()), expire_first=True
        )
        return Response(answer, media_type="application/json")

    @app.get("/v1/campaigns/{campaign_id}/results", response_model=list[dict[str, Any]])
    async def results(
        campaign_id: str,
        request: Request,
        _: RequesterDep,
        verdict: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
        floor: bool = False,
    ) -> Response:
        """Final label, confidence (the verdict's probability of that label) and number of
        labels per item, from the campaign's verdict or the ``verdict`` asked for
        (``posterior`` or an aggregator id such as ``ds``); ``floor=true``: confidences
        under the probability floor fitted on the campaign's gold sample (the ``floor``
        of ``…/calibration``; 422 while no gold item has a label). Computed once per event
        count and query; an aggregator verdict is fitted in a child process under the
        server's deadline (503 past it, or while the server's compute slots are busy:
        ``Retry-After``)."""

        def compute(c: Campaign, fitted: Any) -> bytes:
            frame = c.results(verdict, floor=floor, fitted=fitted)
            # 15 digits, pandas' most: its default of 10 would print an EM confidence of
            # 1 - 1e-12 as 1.0 (the calibration endpoint reports full precision too)
            return str(frame.reset_index().to_json(orient="records", double_precision=15)).encode()

        answer = await service.verdict_read(
            request, campaign_id, "results", verdict, (verdict, floor), compute
        )
        return Response(answer, media_type="application/json")

    @app.get("/v1/campaigns/{campaign_id}/dashboard", response_model=dict[str, Any])
    def dashboard_data(campaign_id: str, _: RequesterDep) -> Response:
        """Everything the dashboard draws (status, spend over time, labels per item,
        worker agreement, and with gold the ``calibration`` on it, as ``…/calibration``).
        Computed once per event count (the page polls it)."""
        answer = service.cached_read(
            campaign_id,
            "dashboard",
            (),
            lambda c: _encoded(c.dashboard_data()),
            expire_first=True,
        )
        return Response(answer, media_type="application/json")

    @app.put("/v1/campaigns/{campaign_id}/gold", status_code=204)
    def put_gold(campaign_id: str, body: list[GoldLabel], _: RequesterDep) -> Response:
        """Replace the campaign's gold labels: true classes for a sample of its items (at
        most one row per item). They measure the verdict (``GET …/calibration``, the
        dashboard) and nothing else: the policy and the verdict never read them, so they
        change no assignment and no result. Stored as a ``gold_set`` event; the same gold
        again stores nothing."""
        if len(body) > limits.max_items_per_request:
            raise InvalidParameterError(
                f"{len(body)} gold rows in one request; this server takes at most "
                f"{limits.max_items_per_request}"
            )
        service.check_ids([row.item for row in body], "gold item")
        longest = max((len(row.label) for row in body), default=0)
        if longest > limits.max_id_length:
            raise InvalidParameterError(
                f"a gold label of {longest} characters; this server takes at most "
                f"{limits.max_id_length}"
            )
        rows = [(row.item, row.label) for row in body]
        # caught up first (read=True) although it writes: "the same gold again stores
        # nothing" must compare with the stored gold, not a stale copy's
        service.run(campaign_id, lambda c: c.set_gold(rows), read=True)
        return Response(status_code=204)

    @app.get("/v1/campaigns/{campaign_id}/gold", response_model=list[GoldLabel])
    def get_gold(campaign_id: str, _: RequesterDep) -> list[GoldLabel]:
        """The gold labels, in item order (an empty list: none)."""
        gold = service.run(campaign_id, lambda c: c.gold(), read=True)
        return [GoldLabel(item=item, label=label) for item, label in gold.items()]

    @app.delete("/v1/campaigns/{campaign_id}/gold", status_code=204)
    def delete_gold(campaign_id: str, _: RequesterDep) -> Response:
        """Remove the gold labels (a ``gold_removed`` event; without gold, nothing)."""
        service.run(campaign_id, lambda c: c.remove_gold(), read=True)  # as put_gold
        return Response(status_code=204)

    @app.get("/v1/campaigns/{campaign_id}/calibration", response_model=dict[str, Any])
    async def calibration(
        campaign_id: str,
        request: Request,
        _: RequesterDep,
        verdict: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    ) -> Response:
        """Accuracy and calibration of the verdict's probabilities (those ``…/results``
        reports; ``verdict``: another verdict) on the gold items with at least one label:
        ``n_gold``, ``n_scored``, ``accuracy``, ``confidence`` (mean), ``ece``,
        ``ece_mass``, ``nll``, ``brier`` and the reliability diagram's ``bins`` (10
        equal-width bins of the confidence: ``count``, mean ``confidence``, ``accuracy``).
        404 while the campaign has no gold. Computed once per event count and query; the
        verdict is fitted as for ``…/results``."""
        answer = await service.verdict_read(
            request,
            campaign_id,
            "calibration",
            verdict,
            (verdict,),
            lambda c, fitted: _encoded(c.calibration(verdict, fitted=fitted)),
        )
        if answer == _NULL:
            raise HTTPException(
                404,
                f"campaign {campaign_id} has no gold labels; upload them with "
                f"PUT /v1/campaigns/{campaign_id}/gold",
            )
        return Response(answer, media_type="application/json")

    @app.get("/dashboard/{campaign_id}", response_class=HTMLResponse, include_in_schema=False)
    def dashboard_page(campaign_id: str) -> HTMLResponse:
        """The live dashboard page; it holds no data, so it needs no key (the page reads the
        requester key from the URL fragment, ``#key=...``, keeps it in the tab's session
        storage and removes it from the address bar). Its Content-Security-Policy allows
        only its own inline script and style and requests to this server."""
        return HTMLResponse(
            DASHBOARD_HTML,
            headers={"content-security-policy": DASHBOARD_CSP, "cache-control": "no-store"},
        )

    @app.get("/v1/campaigns/{campaign_id}/export", response_class=PlainTextResponse)
    def export(campaign_id: str, _: RequesterDep) -> str:
        """Every label received, as crowd-kit's CSV ``task,worker,label``."""
        frame = service.run(campaign_id, lambda c: c.export_labels(), read=True)
        return str(frame.to_csv(index=False))

    _mount_docs(app)
    return app


def _mount_docs(app: FastAPI) -> None:
    """Swagger UI at ``/docs`` and ReDoc at ``/redoc`` with their scripts and styles from the
    installed ``fastapi-offline`` package (FastAPI's defaults load them from a CDN, so the
    pages were blank offline)."""
    try:
        static = resources.files("fastapi_offline").joinpath("static")
    except ModuleNotFoundError:  # an install without the service extra's docs assets
        return
    app.mount("/docs-static", StaticFiles(directory=str(static)), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="crowdbudget API",
            swagger_js_url="/docs-static/swagger-ui-bundle.js",
            swagger_css_url="/docs-static/swagger-ui.css",
            swagger_favicon_url="/docs-static/favicon.png",
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url="/openapi.json",
            title="crowdbudget API",
            redoc_js_url="/docs-static/redoc.standalone.js",
            redoc_favicon_url="/docs-static/favicon.png",
            with_google_fonts=False,
        )
