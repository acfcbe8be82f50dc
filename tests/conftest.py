"""Shared fixtures: database URLs for the campaign store (SQLite always; PostgreSQL when a
server is configured — CI starts one with .ci/postgres.sh and requires it)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _postgres_database() -> tuple[str, str]:
    base = os.environ.get("CROWDBUDGET_POSTGRES_URL")
    if not base:
        if os.environ.get("CROWDBUDGET_REQUIRE_POSTGRES"):
            raise AssertionError("CROWDBUDGET_POSTGRES_URL is required here (.ci/postgres.sh)")
        pytest.skip("no PostgreSQL server configured (CI starts one with .ci/postgres.sh)")
    import sqlalchemy as sa

    name = f"crowdbudget_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base.rsplit("/", 1)[0] + "/" + name, name


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL of each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    url, name = _postgres_database()
    yield url
    import sqlalchemy as sa

    admin = sa.create_engine(os.environ["CROWDBUDGET_POSTGRES_URL"], isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
