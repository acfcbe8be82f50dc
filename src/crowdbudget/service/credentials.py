"""Keys: the credentials table (requester keys, worker tokens), the operator key, and who
created each campaign (for the per-key campaign quota).

Keys are random 256-bit tokens stored only as SHA-256 hashes (a fast hash is enough for keys
of that entropy; there is nothing to brute-force). A key read from the database is cached
for :data:`KEY_RECHECK_SECONDS`: a revoked key stops working at once in the process that
revoked it and within that many seconds in other processes on the same database.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

import sqlalchemy as sa
from starlette.concurrency import run_in_threadpool

from crowdbudget.campaign import EventStore
from crowdbudget.campaign.store import create_tables

#: seconds after which a cached key is looked up again (revocations by other processes)
KEY_RECHECK_SECONDS = 2.0
#: cached keys at most; the cache is emptied beyond (the keys in use are read again)
MAX_CACHED_KEYS = 100_000
#: the creator recorded for campaigns of a server without an operator key
ANYONE = "anyone"

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
#: :data:`ANYONE` on a server without one; the same metadata as the credentials
_CREATORS = sa.Table(
    "campaign_creators",
    _CREDENTIALS.metadata,
    sa.Column("campaign_id", sa.String(64), primary_key=True),
    sa.Column("creator", sa.String(64), nullable=False, index=True),
    sa.Column("created_at", sa.Float, nullable=False),
)


def hash_key(key: str) -> str:
    """The SHA-256 of ``key``, hex: how a key is stored and compared."""
    return hashlib.sha256(key.encode()).hexdigest()


class Credentials:
    """The keys of the campaigns in ``store`` (tables created if missing) and the server's
    ``operator_key`` (None: the server has none).

    A role is ``"requester"`` or ``"worker"``; a worker's key also names the worker. Look-ups
    answer ``(role, worker id or None)`` for a key on a campaign, None when the key gives no
    access to it."""

    def __init__(self, store: EventStore, operator_key: str | None) -> None:
        self.engine = store.engine
        create_tables(self.engine, _CREDENTIALS.metadata)
        self.operator_key = operator_key
        # key hash -> (campaign, role, worker, when it was last read from the database)
        self._cache: dict[str, tuple[str, str, str | None, float]] = {}

    def add(self, campaign_id: str, role: str, worker_id: str | None = None) -> str:
        """A new key of ``role`` on the campaign (returned once; only its hash is kept)."""
        key = secrets.token_urlsafe(32)
        with self.engine.begin() as conn:
            conn.execute(
                _CREDENTIALS.insert().values(
                    key_hash=hash_key(key),
                    campaign_id=campaign_id,
                    role=role,
                    worker_id=worker_id,
                    created_at=time.time(),
                )
            )
        return key

    def revoke(self, campaign_id: str, role: str, worker_id: str | None = None) -> int:
        """Delete the campaign's keys of ``role`` (of one worker, for workers); returns how
        many. They stop working at once here, within :data:`KEY_RECHECK_SECONDS` elsewhere."""
        where = [_CREDENTIALS.c.campaign_id == campaign_id, _CREDENTIALS.c.role == role]
        if worker_id is not None:
            where.append(_CREDENTIALS.c.worker_id == worker_id)
        with self.engine.begin() as conn:
            n = conn.execute(_CREDENTIALS.delete().where(*where)).rowcount
        for digest, (owner, owner_role, owner_worker, _) in list(self._cache.items()):
            if (
                owner == campaign_id
                and owner_role == role
                and (worker_id is None or owner_worker == worker_id)
            ):
                self._cache.pop(digest, None)
        return int(n)

    def rotate_requester_key(self, campaign_id: str) -> str:
        """A new requester key; the old ones stop working."""
        self.revoke(campaign_id, "requester")
        return self.add(campaign_id, "requester")

    async def who_async(self, campaign_id: str, key: str) -> tuple[str, str | None] | None:
        """:meth:`who` for the request path: a key read recently is answered on the event
        loop (a dict look-up: no thread-pool hop per request); a miss, or a key last read
        more than :data:`KEY_RECHECK_SECONDS` ago (it may have been revoked by another
        process), asks the database in a worker thread."""
        cached = self._cache.get(hash_key(key))
        if cached is None or time.monotonic() - cached[3] > KEY_RECHECK_SECONDS:
            return await run_in_threadpool(self.who, campaign_id, key)
        owner, role, worker_id, _ = cached
        return (role, worker_id) if owner == campaign_id else None

    def who(self, campaign_id: str, key: str) -> tuple[str, str | None] | None:
        """The role (and worker id) of ``key`` on the campaign, or None."""
        digest = hash_key(key)
        cached = self._cache.get(digest)
        if cached is None or time.monotonic() - cached[3] > KEY_RECHECK_SECONDS:
            query = sa.select(_CREDENTIALS).where(_CREDENTIALS.c.key_hash == digest)
            with self.engine.connect() as conn:
                row = conn.execute(query).first()
            if row is None:
                self._cache.pop(digest, None)
                return None
            if len(self._cache) >= MAX_CACHED_KEYS:
                self._cache.clear()  # rare; the keys in use are read again
            cached = (row.campaign_id, row.role, row.worker_id, time.monotonic())
            self._cache[digest] = cached
        owner, role, worker_id, _ = cached
        return (role, worker_id) if owner == campaign_id else None

    def is_operator(self, key: str) -> bool:
        """Whether ``key`` is the server's operator key (compared in constant time)."""
        operator_key = self.operator_key
        return operator_key is not None and hmac.compare_digest(
            hash_key(key), hash_key(operator_key)
        )

    def campaigns_of(self, key: str) -> list[str]:
        """The campaigns ``key`` is a requester key of."""
        query = sa.select(_CREDENTIALS.c.campaign_id).where(
            _CREDENTIALS.c.key_hash == hash_key(key), _CREDENTIALS.c.role == "requester"
        )
        with self.engine.connect() as conn:
            return [row.campaign_id for row in conn.execute(query)]

    # ------------------------------------------------------------------ creators
    def created_by(self, creator: str) -> int:
        """How many campaigns ``creator`` (an operator key's hash, or :data:`ANYONE`)
        created."""
        query = sa.select(sa.func.count()).where(_CREATORS.c.creator == creator)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def record_creator(self, campaign_id: str, creator: str) -> None:
        """Count the new campaign against ``creator``'s quota."""
        with self.engine.begin() as conn:
            conn.execute(
                _CREATORS.insert().values(
                    campaign_id=campaign_id, creator=creator, created_at=time.time()
                )
            )
