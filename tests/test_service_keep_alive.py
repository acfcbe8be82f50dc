"""Idle keep-alive connections: the server closes them after ``--keep-alive-timeout``, and
the load generator of the multi-process benchmark never sends a request on a connection the
server closed (such a request got no answer and was counted as a server error)."""

from __future__ import annotations

import time
from pathlib import Path

from crowdbudget.client import Client
from crowdbudget.service.local import LocalServer
from crowdbudget.testing.service_load import _closed_by_peer, _Connections


def test_a_connection_the_server_closed_is_not_reused(tmp_path: Path) -> None:
    with LocalServer(
        f"sqlite:///{tmp_path / 'k.db'}", extra_args=["--keep-alive-timeout", "1"]
    ) as server:
        created = Client(server.url).create_campaign(items=["a", "b"], budget=10)
        cid, key = created["campaign_id"], created["requester_key"]
        token = Client(server.url, key).add_worker(cid, "w")["worker_token"]
        connections = _Connections([server.url], timeout=10)
        path = f"/v1/campaigns/{cid}/assignments"
        assert connections.post(0, path, token, None)[0] == 200
        first = connections._open[0]
        time.sleep(2.5)  # idle past the server's keep-alive timeout: it closed its end
        assert _closed_by_peer(first)
        status, _ = connections.post(0, path, token, None)  # the pending one, again
        assert status == 200
        assert connections._open[0] is not first
        connections.close()
