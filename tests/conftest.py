"""Shared fixtures: database URLs for the campaign store (SQLite always; PostgreSQL when a
server is configured — CI starts one with .ci/postgres.sh and requires it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# property tests draw the same examples on every run (a failure reproduces; CI cannot flake on
# a draw no one saw before) and keep no example database between runs
settings.register_profile("crowdbudget", derandomize=True, database=None)
settings.load_profile("crowdbudget")


def _postgres_database() -> tuple[str, str]:
    base = os.environ.get("CROWDBUDGET_POSTGRES_URL")
    if not base:
        if os.environ.get("CROWDBUDGET_REQUIRE_POSTGRES"):
            raise AssertionError("CROWDBUDGET_POSTGRES_URL is required here (.ci/postgres.sh)")
        pytest.skip("no PostgreSQL server configured (CI starts one with .ci/postgres.sh)")
    from crowdbudget.testing.service_load import create_database

    return create_database(base)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL of each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    url, name = _postgres_database()
    yield url
    from crowdbudget.testing.service_load import drop_database

    drop_database(os.environ["CROWDBUDGET_POSTGRES_URL"], name)
