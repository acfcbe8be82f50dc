"""A small Python client for the crowdbudget service (``crowdbudget serve``).

Example (against a running service)::

    from crowdbudget.client import Client
    operator = Client("http://127.0.0.1:8000", operator_key)   # None if the server has none
    created = operator.create_campaign(items=["q1", "q2"], budget=10, policy="opt-kg")
    boss = operator.with_key(created["requester_key"])
    token = boss.add_worker(created["campaign_id"], "alice")["worker_token"]
    alice = operator.with_key(token)
    work = alice.next_assignment(created["campaign_id"])       # None: no work now
    alice.submit_label(created["campaign_id"], work["assignment_id"], "1")
    print(boss.status(created["campaign_id"]))
    boss.put_gold(created["campaign_id"], {"q1": "1"})         # gold for a sample of items
    print(boss.calibration(created["campaign_id"])["ece"])

Errors come back as :class:`ServiceError` carrying the HTTP status and the service's
one-line message; no answer in time, or no connection, as :class:`ServiceUnavailableError`
(a :class:`ServiceError` with status 0) whose message is one line naming the request and the
timeout to raise.

Timeouts fit the server's own limits: an ordinary request waits ``timeout`` seconds (10), a
request that sets up a campaign's policy (:meth:`Client.create_campaign`,
:meth:`Client.add_items`) ``setup_timeout`` seconds (:data:`SETUP_REQUEST_TIMEOUT`, 50: the
server first tries the set-up in a helper process under its ``setup_timeout`` of 10 s, waiting
up to 30 s more for a helper that is starting, then sets the campaign up itself, about as
long again). A connection that cannot be made is tried :data:`CONNECT_RETRIES` more times
(nothing reached the server, so no request is sent twice). A request over the server's rate
for this key (429) is sent again after the ``Retry-After`` seconds the server names (a refused
request changed nothing, so the retry is safe), for at most ``max_rate_wait`` seconds in all;
then it is a :class:`ServiceError`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

try:
    import httpx
except ImportError:
    raise ImportError(
        "crowdbudget.client needs httpx, one of the service extras: pip install -e "
        "'.[service]' in a clone (pip install 'crowdbudget[service]' from a registry)"
    ) from None


from crowdbudget.service.settings import ServiceSettings
from crowdbudget.service.setup_probe import HELPER_GRACE

#: seconds an ordinary request waits for the service's answer
DEFAULT_TIMEOUT = 10.0
#: seconds a request that sets up a campaign's policy waits: the server's default set-up limit
#: twice (its probe in a helper process, then its own set-up) and the grace it gives a
#: set-up helper that is starting (:mod:`crowdbudget.service.setup_probe`)
SETUP_REQUEST_TIMEOUT = 2 * ServiceSettings.setup_timeout + HELPER_GRACE
#: further attempts at a connection that could not be made (no request reached the server)
CONNECT_RETRIES = 3


class ServiceError(Exception):
    """The service refused a request (``status``: the HTTP status code; 0 when no answer
    came, :class:`ServiceUnavailableError`)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}" if status else detail)
        self.status = status
        self.detail = detail


class ServiceUnavailableError(ServiceError):
    """No answer: the service could not be reached, or did not answer within the timeout
    (``status`` 0). The message is one line: the request, what happened, what to change."""

    def __init__(self, detail: str) -> None:
        super().__init__(0, detail)


class Client:
    """HTTP client for one key: the operator key (creates campaigns; None when the server has
    no operator key), a requester key or a worker token."""

    def __init__(
        self,
        base_url: str,
        key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        setup_timeout: float = SETUP_REQUEST_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        max_rate_wait: float = 60.0,
    ) -> None:
        """``timeout``: seconds an ordinary request waits; ``setup_timeout``: seconds
        :meth:`create_campaign` and :meth:`add_items` wait (raise both for a server run with
        a larger ``--setup-timeout``); ``transport``: httpx's (tests), else one that retries
        a failed connection :data:`CONNECT_RETRIES` times."""
        self.base_url = base_url.rstrip("/")
        self.key = key
        self.timeout = timeout
        self.setup_timeout = setup_timeout
        self.max_rate_wait = max_rate_wait
        #: why the last :meth:`next_assignment` found no work (None: it found some, or unknown)
        self.no_work_reason: str | None = None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            transport=transport or httpx.HTTPTransport(retries=CONNECT_RETRIES),
        )
        self._transport = transport

    def with_key(self, key: str) -> Client:
        """A client for the same service with another key."""
        return Client(
            self.base_url,
            key,
            timeout=self.timeout,
            setup_timeout=self.setup_timeout,
            transport=self._transport,
            max_rate_wait=self.max_rate_wait,
        )

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, *, setup: bool, **kwargs: Any) -> httpx.Response:
        """One HTTP exchange; no answer in time or no connection is one
        :class:`ServiceUnavailableError` line naming the request and the timeout to raise."""
        timeout = self.setup_timeout if setup else self.timeout
        request = f"{method} {self.base_url}/v1{path}"
        try:
            return self._http.request(method, f"/v1{path}", timeout=timeout, **kwargs)
        except httpx.TimeoutException as error:
            what = "setup_timeout" if setup else "timeout"
            stage = "connect" if isinstance(error, httpx.ConnectTimeout) else "answer"
            raise ServiceUnavailableError(
                f"{request}: no {stage} within {timeout:g} s (the client's {what}; a busy "
                f"server may need more: Client(..., {what}=SECONDS))"
            ) from None
        except httpx.TransportError as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise ServiceUnavailableError(
                f"{request}: cannot reach the service ({reason or type(error).__name__}; "
                f"tried {CONNECT_RETRIES + 1} times); is crowdbudget serve running there?"
            ) from None

    def _call(self, method: str, path: str, *, setup: bool = False, **kwargs: Any) -> Any:
        """One request; ``setup``: it sets up a campaign's policy (``setup_timeout``). A 429 is
        sent again after its ``Retry-After``, for at most ``max_rate_wait`` seconds in all."""
        response = self._exchange(method, path, setup=setup, **kwargs)
        if response.status_code == 204:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    def _exchange(self, method: str, path: str, *, setup: bool, **kwargs: Any) -> httpx.Response:
        """:meth:`_call`'s exchange: the response, a 429 sent again, an error raised."""
        waited = 0.0
        while True:
            response = self._send(method, path, setup=setup, **kwargs)
            if response.status_code != 429:
                break
            try:
                pause = float(response.headers.get("retry-after", ""))
            except ValueError:
                break
            if not pause >= 0.0 or waited + pause > self.max_rate_wait:
                break
            time.sleep(pause)
            waited += pause
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise ServiceError(response.status_code, str(detail))
        return response

    def create_campaign(self, **config: Any) -> dict[str, Any]:
        """Create a campaign (fields as ``Campaign.create``); returns id and requester key."""
        result: dict[str, Any] = self._call("POST", "/campaigns", json=config, setup=True)
        return result

    def list_campaigns(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/campaigns")
        return result

    def add_items(self, campaign_id: str, items: list[str]) -> None:
        self._call("POST", f"/campaigns/{campaign_id}/items", json={"items": items}, setup=True)

    def add_worker(self, campaign_id: str, worker_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST", f"/campaigns/{campaign_id}/workers", json={"worker_id": worker_id}
        )
        return result

    def next_assignment(self, campaign_id: str) -> dict[str, Any] | None:
        """The calling worker's next assignment, or None (then :attr:`no_work_reason` says
        why when the service knows: ``blocked``, ``budget``, ``capacity``, ``done``, …)."""
        path = f"/campaigns/{campaign_id}/assignments"
        response = self._exchange("POST", path, setup=False)
        if response.status_code == 204:
            self.no_work_reason = response.headers.get("x-no-work-reason")
            return None
        self.no_work_reason = None
        result: dict[str, Any] = response.json()
        return result

    def push(
        self, campaign_id: str, *, count: int | None = None, worker_ids: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """Push mode (requester key): ``count`` assignments whose workers the policy picks
        (a ``mode="push"`` campaign), or one per worker in ``worker_ids``."""
        body: dict[str, Any] = {} if count is None else {"count": count}
        if worker_ids is not None:
            body["worker_ids"] = worker_ids
        result: list[dict[str, Any]] = self._call(
            "POST", f"/campaigns/{campaign_id}/push", json=body
        )
        return result

    def submit_label(self, campaign_id: str, assignment_id: str, label: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST",
            f"/campaigns/{campaign_id}/assignments/{assignment_id}/label",
            json={"label": label},
        )
        return result

    def cancel(self, campaign_id: str, assignment_id: str) -> None:
        self._call("POST", f"/campaigns/{campaign_id}/assignments/{assignment_id}/cancel")

    def status(self, campaign_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/campaigns/{campaign_id}/status")
        return result

    def results(
        self, campaign_id: str, verdict: str | None = None, *, floor: bool = False
    ) -> list[dict[str, Any]]:
        """Label, confidence and labels used per item (``verdict``: another verdict;
        ``floor``: confidences under the probability floor fitted on the campaign's gold)."""
        params: dict[str, Any] = {} if verdict is None else {"verdict": verdict}
        if floor:
            params["floor"] = "true"
        result: list[dict[str, Any]] = self._call(
            "GET", f"/campaigns/{campaign_id}/results", params=params
        )
        return result

    def put_gold(self, campaign_id: str, gold: Mapping[str, str] | Iterable[Sequence[str]]) -> None:
        """Replace the campaign's gold labels (``{item: label}`` or ``(item, label)`` pairs):
        true classes for a sample of the items, used only to measure the verdict
        (:meth:`calibration`, the dashboard)."""
        rows = gold.items() if isinstance(gold, Mapping) else gold
        body = [{"item": item, "label": label} for item, label in rows]
        self._call("PUT", f"/campaigns/{campaign_id}/gold", json=body)

    def get_gold(self, campaign_id: str) -> dict[str, str]:
        """The campaign's gold labels, ``{item: label}`` in item order (empty: none)."""
        rows: list[dict[str, str]] = self._call("GET", f"/campaigns/{campaign_id}/gold")
        return {row["item"]: row["label"] for row in rows}

    def delete_gold(self, campaign_id: str) -> None:
        """Remove the campaign's gold labels (without gold: nothing happens)."""
        self._call("DELETE", f"/campaigns/{campaign_id}/gold")

    def calibration(self, campaign_id: str, verdict: str | None = None) -> dict[str, Any]:
        """Accuracy, ECE (equal-width and equal-mass), NLL, Brier score and the reliability
        bins of the verdict on the gold items that have labels (``verdict``: another
        verdict); a :class:`ServiceError` 404 while the campaign has no gold."""
        params = {} if verdict is None else {"verdict": verdict}
        result: dict[str, Any] = self._call(
            "GET", f"/campaigns/{campaign_id}/calibration", params=params
        )
        return result

    def export(self, campaign_id: str) -> str:
        result: str = self._call("GET", f"/campaigns/{campaign_id}/export")
        return result

    def pending_assignments(
        self, campaign_id: str, worker_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The unanswered assignments (of one worker, or all)."""
        params = {} if worker_id is None else {"worker_id": worker_id}
        result: list[dict[str, Any]] = self._call(
            "GET", f"/campaigns/{campaign_id}/assignments", params=params
        )
        return result

    def update_settings(
        self,
        campaign_id: str,
        *,
        ttl: float | None = None,
        max_pending_per_worker: int | None = None,
    ) -> None:
        """Change the campaign's time-to-live or pending assignments per worker."""
        body: dict[str, Any] = {}
        if ttl is not None:
            body["ttl"] = ttl
        if max_pending_per_worker is not None:
            body["max_pending_per_worker"] = max_pending_per_worker
        self._call("PATCH", f"/campaigns/{campaign_id}", json=body)

    def rotate_requester_key(self, campaign_id: str) -> str:
        """A new requester key (the old ones stop working)."""
        result: dict[str, Any] = self._call("POST", f"/campaigns/{campaign_id}/requester-key")
        return str(result["requester_key"])

    def rotate_worker_token(self, campaign_id: str, worker_id: str) -> str:
        """A new token for the worker (their old tokens stop working)."""
        result: dict[str, Any] = self._call(
            "POST", f"/campaigns/{campaign_id}/workers/{worker_id}/rotate"
        )
        return str(result["worker_token"])

    # ------------------------------------------------------------------ control tasks
    def control(self, campaign_id: str) -> dict[str, Any]:
        """The control tasks: ``settings`` (None without), ``items`` (``[{item, label}]``)
        and ``blocked_workers`` with their evidence."""
        result: dict[str, Any] = self._call("GET", f"/campaigns/{campaign_id}/control")
        return result

    def add_control_items(
        self, campaign_id: str, items: Mapping[str, str] | Iterable[Sequence[str]]
    ) -> None:
        """Make items control items with their known answers (``{item: label}`` or pairs)."""
        rows = items.items() if isinstance(items, Mapping) else items
        body = [{"item": item, "label": label} for item, label in rows]
        self._call("POST", f"/campaigns/{campaign_id}/control/items", json=body)

    def update_control(self, campaign_id: str, **settings: Any) -> None:
        """Change the control rule, the blocking or ``blocked_labels`` (``drop`` / ``keep``):
        ``first_k``, ``rate``, ``block_below``, ``block_confidence``, ``min_answers``,
        ``prior``."""
        self._call("PATCH", f"/campaigns/{campaign_id}/control", json=settings)

    def blocked_workers(self, campaign_id: str) -> list[dict[str, Any]]:
        """The blocked workers, each with its evidence."""
        result: list[dict[str, Any]] = self._call(
            "GET", f"/campaigns/{campaign_id}/blocked-workers"
        )
        return result

    def block_worker(self, campaign_id: str, worker_id: str, reason: str | None = None) -> None:
        """Block a worker by hand (no more work for them), with the requester's ``reason``
        (one line, at most 200 characters) when given."""
        path = f"/campaigns/{campaign_id}/blocked-workers/{worker_id}"
        if reason is None:
            self._call("PUT", path)
        else:
            self._call("PUT", path, json={"reason": reason})

    def unblock_worker(self, campaign_id: str, worker_id: str) -> None:
        """Lift a worker's block."""
        self._call("DELETE", f"/campaigns/{campaign_id}/blocked-workers/{worker_id}")

    def revoke_worker(self, campaign_id: str, worker_id: str) -> dict[str, Any]:
        """Revoke the worker's tokens and cancel their pending assignments."""
        result: dict[str, Any] = self._call(
            "DELETE", f"/campaigns/{campaign_id}/workers/{worker_id}"
        )
        return result
