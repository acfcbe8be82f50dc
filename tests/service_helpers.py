"""Set-up shared by the HTTP service's tests: a ``TestClient`` on a fresh SQLite database
(:class:`Api`; :class:`CampaignApi` with one campaign already created), the bearer header,
and the database checksum that shows a refused request stored nothing; and the fake clock
a campaign's tests move by hand (:class:`FakeClock`); the live children of a process
(:func:`live_children`, :func:`alive`: a server's compute helpers, a command's pool workers)."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from fastapi.testclient import TestClient

from crowdbudget.service import create_app
from crowdbudget.service.settings import ServiceSettings

OPERATOR = "operator-key-for-the-tests-0123456789"


@dataclass
class FakeClock:
    """A campaign's ``clock``: the time is ``now``, moved by the test (``clock.now += 31``)."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


def live_children(pid: int) -> list[int]:
    """Every live (not zombie) process whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so after the last ')'
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux /proc)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def bearer(key: str | None) -> dict[str, str]:
    """The ``Authorization`` header of ``key`` (none for ``None``: an anonymous request)."""
    return {} if key is None else {"Authorization": f"Bearer {key}"}


def db_checksum(url: str, without: str | None = None) -> str:
    """SHA-256 over every row of the events table (but campaign ``without``'s, if named) and
    of the credentials table, in key order."""
    engine = sa.create_engine(url)
    digest = hashlib.sha256()
    with engine.connect() as conn:
        where = "" if without is None else "WHERE campaign_id != :c "
        query = sa.text(f"SELECT * FROM events {where}ORDER BY campaign_id, seq")
        for row in conn.execute(query, {} if without is None else {"c": without}):
            digest.update(repr(tuple(row)).encode())
        for row in conn.execute(sa.text("SELECT * FROM credentials ORDER BY key_hash")):
            digest.update(repr(tuple(row)).encode())
    engine.dispose()
    return digest.hexdigest()


def expect_refusal(url: str, status: int, send: Callable[[], httpx.Response], what: str) -> str:
    """Send a request (``send``) that must be refused with ``status``; assert the database at
    ``url`` did not change and the answer is one short JSON line; return the detail."""
    before = db_checksum(url)
    response = send()
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"].startswith("application/json")
    assert len(response.content) < 1000, len(response.content)
    assert db_checksum(url) == before, f"{what} changed the database"
    detail: str = response.json()["detail"]
    assert detail and "\n" not in detail
    return detail


class Api:
    """A TestClient on an app with ``settings`` on a fresh database; paths are absolute and
    a request carries the key it is given (none by default)."""

    def __init__(self, tmp_path: Path, name: str = "svc.db", **settings: Any) -> None:
        self.url = f"sqlite:///{tmp_path / name}"
        self.settings = ServiceSettings(**settings)
        self.app = create_app(self.url, settings=self.settings)
        self.client = TestClient(self.app, raise_server_exceptions=False)

    def headers(self, key: str | None) -> dict[str, str]:
        return bearer(key)

    def call(self, method: str, path: str, key: str | None = None, **kwargs: Any) -> Any:
        headers = {**bearer(key), **kwargs.pop("headers", {})}
        return self.client.request(method, path, headers=headers, **kwargs)

    def create(self, key: str | None = OPERATOR, **body: Any) -> dict[str, Any]:
        body = {"items": [f"i{k}" for k in range(6)], "budget": 20, **body}
        response = self.call("POST", "/v1/campaigns", key, json=body)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created

    def worker(self, cid: str, boss: str, name: str) -> str:
        response = self.call("POST", f"/v1/campaigns/{cid}/workers", boss, json={"worker_id": name})
        assert response.status_code == 201, response.text
        token: str = response.json()["worker_token"]
        return token

    def refused(self, method: str, path: str, key: str | None, status: int, **kw: Any) -> str:
        """A request that must be refused with ``status`` (see :func:`expect_refusal`)."""
        send = functools.partial(self.call, method, path, key, **kw)
        return expect_refusal(self.url, status, send, f"{method} {path}")


class CampaignApi:
    """A TestClient on a fresh database (app ``settings``) with one campaign created from
    ``body``; paths are relative to the campaign's and a request carries its requester key
    unless told otherwise (``key=None``: anonymous)."""

    def __init__(
        self, tmp_path: Path, body: dict[str, Any], name: str = "svc.db", **settings: Any
    ) -> None:
        self.url = f"sqlite:///{tmp_path / name}"
        self.client = TestClient(
            create_app(self.url, settings=ServiceSettings(**settings)),
            raise_server_exceptions=False,
        )
        created = self.client.post("/v1/campaigns", json=body)
        assert created.status_code == 201, created.text
        self.cid, self.key = created.json()["campaign_id"], created.json()["requester_key"]
        self.base = f"/v1/campaigns/{self.cid}"

    def call(self, method: str, path: str, key: str | None = "requester", **kw: Any) -> Any:
        key = self.key if key == "requester" else key
        headers = {**bearer(key), **kw.pop("headers", {})}
        return self.client.request(method, self.base + path, headers=headers, **kw)

    def worker(self, name: str) -> str:
        response = self.call("POST", "/workers", json={"worker_id": name})
        assert response.status_code == 201, response.text
        return str(response.json()["worker_token"])

    def label_next(self, token: str, label_of: Callable[[str], str]) -> Any:
        """One request for work by the worker of ``token``; work (200) is answered with
        ``label_of(item)``, which must be accepted. Returns the request's response."""
        work = self.call("POST", "/assignments", key=token)
        if work.status_code == 200:
            path = f"/assignments/{work.json()['assignment_id']}/label"
            label = label_of(work.json()["item_id"])
            answered = self.call("POST", path, key=token, json={"label": label})
            assert answered.status_code == 200, answered.text
        return work

    def refused(self, method: str, path: str, status: int, **kw: Any) -> str:
        """A request that must be refused with ``status`` (see :func:`expect_refusal`)."""
        send = functools.partial(self.call, method, path, **kw)
        return expect_refusal(self.url, status, send, f"{method} {path}")
