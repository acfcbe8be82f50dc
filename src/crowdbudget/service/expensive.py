"""Every expensive computation a request can start, in one place, each bounded by the server.

- **A campaign's set-up and first decision** (the Hu–Frazier index table, Gittins indices,
  the KOS graph, the exact DP): refused beyond the policy's declared cost, then tried in a
  child process under ``setup_timeout`` before anything is stored
  (:meth:`ExpensiveWork.check_setup`, at creation and when items are added). The server's
  own first decision on a campaign, known by then to fit the limits, runs in a worker
  thread, never on the event loop (:func:`next_assignment`).
- **Aggregator verdict fits** (``…/results``, ``…/calibration`` and the dashboard's, whose
  verdict is the campaign's own): fitted in a child process on a snapshot of the labels,
  under ``compute_timeout`` and ``compute_memory_bytes`` (:func:`fitted_read`); only the
  labels and probabilities come back. The posterior verdict reads the policy's state and
  fits nothing: it is computed in place.

The children are those of :class:`~crowdbudget.service.setup_probe.ComputePool`: at most
``max_compute_jobs`` at once per process, a request finding them busy refused at once (503
with ``Retry-After``), a client that leaves (or a server that shuts down) killing its child.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from crowdbudget.campaign import Campaign, PendingAssignment
from crowdbudget.service.settings import ServiceSettings
from crowdbudget.service.setup_probe import (
    ComputeBusyError,
    ComputeTimeoutError,
    check_setup,
    compute_pool,
)

if TYPE_CHECKING:
    from crowdbudget.service.host import Service

#: how often a request waiting on a child checks whether its client is still there (s)
DISCONNECT_POLL_SECONDS = 0.25
#: fits of one verdict read while items keep being added
VERDICT_ATTEMPTS = 3

#: a verdict's fit input: ``(aggregator id, labels, seed)`` (Campaign.verdict_fit_input)
FitInput = Any
#: a fitted verdict: ``(labels, probabilities, choice)`` (crowdbudget.campaign.fit_verdict)
Fitted = Any


class ExpensiveWork:
    """The compute pool of this process under ``settings``' limits (see the module), and
    the campaigns whose first decision already ran here."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        #: child processes for set-ups and verdict fits (setup_probe.py), shared in-process
        self.pool = compute_pool(settings.max_compute_jobs)
        #: campaigns that made a decision in this process (their first ran off the loop)
        self.decided: set[str] = set()

    def check_setup(self, config: dict[str, Any]) -> None:
        """A campaign's configuration against the policy cost limit, then its set-up and
        first decision tried in a child process (:func:`setup_probe.check_setup`). Blocks
        the calling thread."""
        limits = self.settings
        check_setup(
            config,
            limits.setup_timeout,
            pool=self.pool,
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
        task = asyncio.ensure_future(
            run_in_threadpool(
                self.pool.run,
                job,
                payload,
                timeout=limits.compute_timeout,
                memory=limits.compute_memory_bytes,
                token=token,
                retry_after=self.retry_after,
            )
        )
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_SECONDS)
                if done:
                    return task.result()
                if await request.is_disconnected():
                    self.pool.cancel(token)
                    raise ComputeTimeoutError("the client left; its computation was cancelled")
        except asyncio.CancelledError:
            self.pool.cancel(token)
            raise

    async def fit(self, request: Request, fit_input: FitInput) -> Fitted:
        """The verdict fitted on ``fit_input`` in a child (:meth:`computed`); refused at
        once, before the labels are pickled, when every slot is busy."""
        self.pool.refuse_if_busy(self.retry_after)
        return await self.computed(request, "verdict", fit_input)


async def fitted_read(
    service: Service,
    request: Request,
    campaign_id: str,
    endpoint: str,
    parameters: tuple[Hashable, ...],
    fit_input: Callable[[Campaign], FitInput | None],
    compose: Callable[[Campaign, Fitted | None], bytes],
    *,
    expire_first: bool = False,
) -> bytes:
    """The encoded answer ``compose(campaign, fitted)`` gives, with the verdict fitted in a
    child process on ``fit_input(campaign)`` (None: nothing to fit, ``fitted`` None, e.g.
    the policy's own model, computed in place), kept in the read cache like
    :meth:`Service.cached_read`'s (``expire_first`` as there). A fit covers the labels of the
    event count it started at: the answer is kept only if the campaign is still at that
    count when it is composed, and items added meanwhile make the fit stale (it is fitted
    again)."""
    key = (campaign_id, endpoint, parameters)
    for _ in range(VERDICT_ATTEMPTS):

        def prepare(c: Campaign) -> tuple[int, bytes | None, FitInput | None]:
            if expire_first:
                c.expire_overdue()
            count = c.event_count
            kept = service.reads.get(key, count)
            return count, kept, None if kept is not None else fit_input(c)

        count, kept, snapshot = await run_in_threadpool(
            service.run, campaign_id, prepare, read=True
        )
        if kept is not None:
            return kept
        fitted = None if snapshot is None else await service.expensive.fit(request, snapshot)

        def action(c: Campaign, fitted: Fitted | None = fitted) -> tuple[int, bytes | None]:
            if fitted is not None and fitted[0].shape[0] != len(c.item_ids):
                return c.event_count, None  # items were added meanwhile
            return c.event_count, compose(c, fitted)

        now, answer = await run_in_threadpool(service.run, campaign_id, action, read=True)
        if answer is not None:
            if now == count:
                service.reads.put(key, count, answer)
            return answer
    raise ComputeBusyError("this campaign's items keep changing; try again", 1.0)


def dashboard_fit_input(campaign: Campaign) -> FitInput | None:
    """What the dashboard's verdict (the campaign's own) is fitted on, or None when the
    dashboard shows no verdict (no label and no gold yet) or it is the posterior."""
    snapshot = campaign.verdict_fit_input()
    if snapshot is None or (snapshot[1].items.size == 0 and not campaign.gold()):
        return None
    return snapshot


def dashboard_data(campaign: Campaign, fitted: Fitted | None) -> dict[str, Any]:
    """:meth:`Campaign.dashboard_data` with its verdict taken from ``fitted`` (fitted in a
    child by :func:`fitted_read`; None: the campaign's own computation, for the posterior
    or when no verdict is shown)."""
    return campaign.dashboard_data(fitted=fitted)


def status_fit_input(campaign: Campaign) -> FitInput | None:
    """What the status' verdict (the campaign's own) is fitted on, or None when nothing is
    fitted: no label yet (the status reads the prior) or the posterior verdict."""
    return campaign.verdict_fit_input() if len(campaign.state.label_log) else None


async def status_answer(service: Service, request: Request, campaign_id: str) -> bytes:
    """The campaign's encoded status, its verdict fitted in a child (:func:`fitted_read`;
    overdue assignments released first)."""
    from crowdbudget.service.routers.results import encoded

    return await fitted_read(
        service,
        request,
        campaign_id,
        "status",
        (),
        status_fit_input,
        lambda c, fitted: encoded(c.status(fitted=fitted)),
        expire_first=True,
    )


def _next_or_reason(worker_id: str) -> Callable[[Campaign], NextWork]:
    def decide(c: Campaign) -> NextWork:
        assignment = c.next_assignment(worker_id)
        return assignment, None if assignment is not None else c.no_work_reason(worker_id)

    return decide


#: the worker's next assignment, or None and why (``Campaign.no_work_reason``; None: unknown)
NextWork = tuple[PendingAssignment | None, str | None]


async def next_assignment(service: Service, campaign_id: str, worker_id: str) -> NextWork:
    """The worker's next assignment, or None and why; a campaign's first decision in this
    process (which may build a graph or a table, within the limits its set-up was tried
    under) in a worker thread, every later one on the event loop."""
    if campaign_id in service.expensive.decided:
        return await service.run_async(campaign_id, _next_or_reason(worker_id))
    answer = await run_in_threadpool(service.run, campaign_id, _next_or_reason(worker_id))
    service.expensive.decided.add(campaign_id)
    return answer
