"""crowdbudget.client.Client: timeouts that fit the server's set-up limits, and no answer in
time (or no connection) as one line, not an httpx traceback — in the client and in
examples/live_campaign.py."""

from __future__ import annotations

import importlib.util
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from crowdbudget.client import (
    SETUP_REQUEST_TIMEOUT,
    Client,
    ServiceError,
    ServiceUnavailableError,
)
from crowdbudget.service.settings import ServiceSettings

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "live_campaign.py"


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback socket that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    for connection in held:
        connection.close()
    listener.close()


def test_campaign_set_up_waits_longer_than_the_servers_own_set_up_limits() -> None:
    # the server probes the set-up under setup_timeout, then sets the campaign up itself
    client = Client("http://127.0.0.1:9")
    assert client.setup_timeout == SETUP_REQUEST_TIMEOUT
    assert 2 * ServiceSettings().setup_timeout < SETUP_REQUEST_TIMEOUT
    assert client.with_key("k").setup_timeout == SETUP_REQUEST_TIMEOUT
    assert Client("http://x", timeout=3, setup_timeout=99).with_key("k").setup_timeout == 99


def test_create_campaign_uses_the_set_up_timeout_and_others_the_ordinary_one() -> None:
    seen: dict[str, Any] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen[request.url.path] = request.extensions["timeout"]["read"]
        return httpx.Response(200, json={"campaign_id": "c", "requester_key": "k"})

    client = Client(
        "http://svc", timeout=4, setup_timeout=44, transport=httpx.MockTransport(handler)
    )
    client.create_campaign(items=["a"], budget=1)
    client.status("c")
    assert seen == {"/v1/campaigns": 44, "/v1/campaigns/c/status": 4}


def test_no_answer_in_time_is_one_line_naming_the_timeout(silent_server: str) -> None:
    client = Client(silent_server, timeout=0.3, setup_timeout=0.6)
    started = time.monotonic()
    with pytest.raises(ServiceUnavailableError) as waited:
        client.status("c")
    assert time.monotonic() - started < 5
    message = str(waited.value)
    assert len(message.splitlines()) == 1 and waited.value.status == 0
    assert "no answer within 0.3 s" in message and "timeout=" in message
    assert waited.value.__cause__ is None and waited.value.__suppress_context__
    with pytest.raises(ServiceUnavailableError, match=r"within 0\.6 s .*setup_timeout"):
        client.create_campaign(items=["a"], budget=1)


def test_no_server_is_one_line_after_the_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(ServiceUnavailableError) as refused:
        Client(f"http://127.0.0.1:{port}", timeout=2).status("c")
    message = str(refused.value)
    assert len(message.splitlines()) == 1
    assert "cannot reach the service" in message and "tried 4 times" in message


def test_live_campaign_example_reports_a_timeout_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("live_campaign_timeouts", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    class Stopped:
        def kill(self) -> None: ...

        def wait(self) -> None: ...

    def no_answer(**_: Any) -> None:
        raise ServiceUnavailableError("POST http://svc/v1/campaigns: no answer within 50 s")

    monkeypatch.setattr(example, "start_service", lambda path: (Stopped(), "http://svc"))
    monkeypatch.setattr(example, "run_live", no_answer)
    monkeypatch.setattr("sys.argv", ["live_campaign.py"])
    with pytest.raises(SystemExit) as stopped:
        example.main()
    assert stopped.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err == "live_campaign: error: POST http://svc/v1/campaigns: no answer within 50 s"
    assert issubclass(ServiceUnavailableError, ServiceError)
