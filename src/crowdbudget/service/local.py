"""A ``crowdbudget serve`` process on loopback, for examples, tests and notebooks.

    >>> from crowdbudget.service.local import LocalServer
    >>> with LocalServer("sqlite:///campaigns.db") as server:  # doctest: +SKIP
    ...     client = Client(server.url)

The server is a real uvicorn process (``python -m crowdbudget serve``) on a free port of
127.0.0.1, started with this interpreter; :class:`LocalServer` waits until it answers and
stops it on exit. It binds to loopback only, so it needs no operator key.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from types import TracebackType

import httpx


def free_port() -> int:
    """A TCP port of 127.0.0.1 free at the time of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalServer:
    """``crowdbudget serve --db DB`` on a free loopback port (a context manager).

    Args:
        db: the campaign store's URL (``sqlite:///path.db``, a PostgreSQL URL).
        extra_args: more ``serve`` flags (``["--setup-timeout", "30"]``).
        start_timeout: seconds to wait for the server to answer.

    Attributes:
        url: ``http://127.0.0.1:PORT`` once started.
    """

    def __init__(
        self, db: str, *, extra_args: list[str] | None = None, start_timeout: float = 30.0
    ) -> None:
        self.db = db
        self.extra_args = list(extra_args or [])
        self.start_timeout = start_timeout
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> LocalServer:
        port = free_port()
        command = [sys.executable, "-m", "crowdbudget", "serve", "--db", self.db]
        command += ["--port", str(port), *self.extra_args]
        self._process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"crowdbudget serve exited with status {self._process.returncode}"
                )
            try:
                httpx.get(f"{self.url}/openapi.json", timeout=0.5)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"crowdbudget serve did not answer within {self.start_timeout:g} s")

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs (None before start and after stop)."""
        return None if self._process is None else self._process.pid

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=10)
            self._process = None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
