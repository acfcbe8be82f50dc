"""The append-only event store of live campaigns (SQLAlchemy Core).

Every accepted change to a campaign is one row of the ``events`` table, committed before the
change is acknowledged (and, for library use, before it is applied in memory; the service
applies first and waits for the commit outside the campaign lock — group commit, see
:meth:`EventStore.wait` and :meth:`crowdbudget.campaign.Campaign.deferred_durability`); the
campaign's state is a pure function of its events, so
:meth:`crowdbudget.campaign.Campaign.load` rebuilds it by replaying them. The default
database is a SQLite file (zero set-up); any SQLAlchemy URL works (PostgreSQL for several
service processes).

Table ``events``: ``campaign_id`` (text), ``seq`` (int, 1, 2, … per campaign), ``kind`` (text),
``payload`` (JSON text), ``created_at`` (float, seconds since the epoch); primary key
(``campaign_id``, ``seq``), so two writers cannot both append event n — the loser gets a
:class:`ConcurrentWriteError` and must reload.

Several processes on one database — the serialisation choice: decisions on a campaign are
serialised by this event-version check (optimistic, with retry by the caller), which alone
guarantees correctness, the same on SQLite and PostgreSQL, and costs nothing for a campaign only
one process writes (the deployment routes a campaign's requests to one process). A process
learns that another one writes to a campaign when it catches up with events it did not write
(:meth:`EventStore.events_after`) or loses a race for an event number; for
:data:`SHARED_SECONDS` afterwards the campaign counts as shared (:meth:`EventStore.shared`) and
the caller catches up before every decision. Catching up alone leaves a race window (from the
read to the commit), and a race lost costs the loser a full reload (its copy applied a decision
that never happened), so on PostgreSQL a shared campaign's decisions are also queued on a
session advisory lock held from the catch-up to the commit (:meth:`EventStore.hold_async`):
the lock only removes lost races — the version check stays the guarantee, so a lock given up
after its timeout costs speed, never correctness.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from crowdbudget.exceptions import CrowdBudgetError

_METADATA = sa.MetaData()

EVENTS = sa.Table(
    "events",
    _METADATA,
    sa.Column("campaign_id", sa.String(64), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)


#: the most events one ``INSERT`` statement writes (a database caps a statement's parameters:
#: 5 per event; SQLite's default cap is 32,766); a larger batch is written in several statements
ROWS_PER_STATEMENT = 500

#: seconds a campaign counts as shared with another process after this process last saw an
#: event of that process in it (:meth:`EventStore.shared`)
SHARED_SECONDS = 2.0


#: seconds a decision waits for a shared campaign's advisory lock before it goes ahead without
#: it (the event-version check still serialises it; PostgreSQL's ``lock_timeout``)
HOLD_TIMEOUT_SECONDS = 2.0

#: the events table's columns in the order of a raw ``INSERT`` (:meth:`EventStore._insert_rows`),
#: and the drivers' positional placeholder per DB-API parameter style
_COLUMNS = tuple(column.name for column in EVENTS.columns)
_PLACEHOLDERS = {"qmark": "?", "format": "%s", "pyformat": "%s"}

#: the encoder of every event's payload: ``json.dumps(payload, separators=(",", ":"))`` —
#: the same text (``json.dumps`` itself builds this encoder anew on each call when given
#: a separator, and encodes with it), built once; it keeps no state between calls
_PAYLOAD_ENCODER = json.JSONEncoder(separators=(",", ":"))
#: its C encoder (the one ``JSONEncoder.encode`` builds per call from the encoder's settings),
#: built once too, without the circular-reference check — an event payload is JSON data, never
#: circular (one would fail with ``RecursionError`` instead of ``ValueError``, stored either
#: way) — so no state is kept between calls; None where the C accelerator is missing
_MAKE_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_C_PAYLOAD_ENCODER = (
    None
    if _MAKE_C_ENCODER is None
    else _MAKE_C_ENCODER(
        None,
        _PAYLOAD_ENCODER.default,
        json.encoder.encode_basestring_ascii,
        _PAYLOAD_ENCODER.indent,
        _PAYLOAD_ENCODER.key_separator,
        _PAYLOAD_ENCODER.item_separator,
        _PAYLOAD_ENCODER.sort_keys,
        _PAYLOAD_ENCODER.skipkeys,
        _PAYLOAD_ENCODER.allow_nan,
    )
)

_HOLDERS = 8  # decisions of one process waiting for advisory locks at once


class ConcurrentWriteError(CrowdBudgetError):
    """Another writer appended to the campaign first; reload it and retry."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One row of the event table."""

    campaign_id: str
    seq: int
    kind: str
    payload: dict[str, Any]
    created_at: float


@dataclass(slots=True, eq=False)
class CampaignHold:
    """A shared campaign's PostgreSQL advisory lock, held by one decision
    (:meth:`EventStore.hold_async`; give it back with :meth:`EventStore.release`)."""

    key: int
    connection: sa.Connection


@dataclass(slots=True, eq=False)
class CommitTicket:
    """An event staged for the next group commit (:meth:`EventStore.stage`)."""

    event: StoredEvent
    #: the event's row: its column values in the table's order (``_COLUMNS``)
    row: tuple[Any, ...]
    epoch: int | None
    settled: bool = False
    error: CrowdBudgetError | None = None
    # coroutines waiting on this ticket (:meth:`EventStore.wait_async`): each future is
    # resolved on its own event loop once the ticket is settled
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=list
    )


def encode_payload(payload: dict[str, Any]) -> str:
    """An event payload's JSON text, as the ``payload`` column holds it (compact separators,
    ASCII, keys in the payload's order): ``json.dumps(payload, separators=(",", ":"))``."""
    if _C_PAYLOAD_ENCODER is None:
        return _PAYLOAD_ENCODER.encode(payload)
    return "".join(_C_PAYLOAD_ENCODER(payload, 0))


def _row_mapping(row: tuple[Any, ...]) -> dict[str, Any]:
    """A :attr:`CommitTicket.row` as ``{column: value}`` (SQLAlchemy's ``INSERT`` parameters)."""
    return dict(zip(_COLUMNS, row, strict=True))


@functools.lru_cache(maxsize=64)
def _insert_statement(mark: str, n_rows: int) -> str:
    """The driver's ``INSERT`` of ``n_rows`` events with placeholder ``mark`` (one text per
    row count, so the driver's own statement cache finds it prepared)."""
    one = "(" + ", ".join([mark] * len(_COLUMNS)) + ")"
    columns = ", ".join(_COLUMNS)
    return f"INSERT INTO {EVENTS.name} ({columns}) VALUES " + ", ".join([one] * n_rows)


def _engine_for(url: str) -> sa.Engine:
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"check_same_thread": False})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            # WAL: readers do not block the writer; synchronous=FULL: a committed event
            # survives a crash of the process (and of the machine)
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA busy_timeout=10000")
            cursor.close()

        return engine
    return sa.create_engine(url, pool_pre_ping=True)


def create_tables(engine: sa.Engine, metadata: sa.MetaData, *, attempts: int = 8) -> None:
    """Create ``metadata``'s tables that do not exist yet, safe against other processes
    creating them at the same moment (several ``serve`` processes started together on a new
    database).

    ``create_all`` checks for each table, then creates it; a concurrent creator may slip in
    between (SQLite: "table events already exists"; PostgreSQL: a duplicate table, or a
    unique violation in its catalogue). Such an error is retried after a short pause: the
    check then finds the other creator's tables and creates nothing. Any other error keeps
    failing and is raised after ``attempts`` tries (about 1.5 s)."""
    for attempt in range(attempts):
        try:
            metadata.create_all(engine)
            return
        except sa.exc.DBAPIError:
            if attempt == attempts - 1:
                raise
            engine.dispose()  # a connection the failed DDL left in a bad state is not reused
            time.sleep(0.01 * 2**attempt)


class EventStore:
    """Append-only events per campaign in a SQL database.

    Args:
        url: SQLAlchemy URL (``sqlite:///campaign.db``; ``sqlite://`` for memory).
    """

    def __init__(self, url: str = "sqlite:///crowdbudget.db") -> None:
        self.url = url
        self._write_lock = threading.Lock()
        self._writer: sa.Connection | None = None
        self._commit_cv = threading.Condition()
        self._queue: list[CommitTicket] = []
        self._flushing = False
        self._failed_epochs: set[int] = set()
        self._insert = EVENTS.insert()
        self._committer: ThreadPoolExecutor | None = None  # drains the queue for coroutines
        # one long-lived connection for catch-up reads (no pool checkout and no liveness
        # ping per read); its lock keeps one read at a time on it
        self._read_lock = threading.Lock()
        self._reader: sa.Connection | None = None
        # campaign id -> when (time.monotonic) this process last saw another one write to it
        self._foreign_writes: dict[str, float] = {}
        # advisory locks of shared campaigns (PostgreSQL only): a few threads that wait for
        # them (a wait takes a thread and a pooled connection) and one that gives them back
        # (never queued behind a wait, which may be for a lock only a release can free)
        self._advisory = url.startswith("postgresql")
        self._holders: ThreadPoolExecutor | None = None
        self._releaser: ThreadPoolExecutor | None = None
        self._lock_engine: sa.Engine | None = None  # their own sessions: one per waiter
        #: what this store did, for tests and benchmarks: ``loads`` (campaigns rebuilt from
        #: all their events), ``catch_ups`` (reads of the events after a copy's number),
        #: ``caught_up_events`` (events those reads returned), ``collisions`` (events that
        #: lost their number to another writer), ``flushes`` (statements that appended),
        #: ``holds`` (advisory locks taken for decisions on shared campaigns);
        #: not synchronised (exact when one thread works at a time)
        self.activity: Counter[str] = Counter()
        try:
            self.engine = _engine_for(url)
            create_tables(self.engine, _METADATA)
        except sa.exc.ArgumentError:
            raise CrowdBudgetError(
                f"cannot use database URL {url!r}; expected e.g. sqlite:///path/to/file.db"
            ) from None
        except sa.exc.OperationalError as exc:
            first = str(exc.orig).splitlines()[0] if exc.orig else str(exc)
            raise CrowdBudgetError(f"cannot open database {url!r}: {first}") from None

    def append(self, campaign_id: str, seq: int, kind: str, payload: dict[str, Any]) -> StoredEvent:
        """Write event number ``seq`` of a campaign (committed when this returns)."""
        ticket = self.stage(campaign_id, seq, kind, payload)
        self.wait(ticket)
        return ticket.event

    def stage(
        self,
        campaign_id: str,
        seq: int,
        kind: str,
        payload: dict[str, Any],
        *,
        epoch: int | None = None,
    ) -> CommitTicket:
        """Queue event number ``seq`` for the next group commit; :meth:`wait` makes it
        durable. ``epoch`` names the in-memory campaign object that already applied the
        event (deferred durability): if one of its events fails to commit, every later
        event staged under the same epoch fails too, because it was decided on a state that
        the store never held — the caller must drop that object and reload."""
        event = StoredEvent(campaign_id, seq, kind, payload, time.time())
        row = (campaign_id, seq, kind, encode_payload(payload), event.created_at)
        ticket = CommitTicket(event, row, epoch)
        with self._commit_cv:
            self._queue.append(ticket)
        return ticket

    def wait(self, ticket: CommitTicket | None) -> None:
        """Block until ``ticket`` (and everything staged before it) is committed; raises
        its error (:class:`ConcurrentWriteError` when another process wrote that event
        number first).

        Group commit (leader/follower): a waiter that finds no flush under way takes the
        whole queue and commits it in one transaction, so N concurrent requests pay for one
        fsync instead of N; the others sleep until their ticket is settled. The queue is
        FIFO and a batch is written in order, so once a ticket is settled every ticket staged
        before it is settled as well."""
        if ticket is None:
            return
        with self._commit_cv:
            while not ticket.settled:
                if self._flushing:
                    self._commit_cv.wait()
                    continue
                batch, self._queue = self._queue, []
                self._flushing = True
                self._commit_cv.release()
                error: Exception | None = None
                try:
                    self._flush(batch)
                except Exception as exc:
                    error = exc
                    raise
                finally:
                    self._commit_cv.acquire()
                    self._flushing = False
                    self._wake(batch, error)
                    self._commit_cv.notify_all()
            # coroutines may have staged behind this batch: nobody else will flush for them
            self._hand_over()
        if ticket.error is not None:
            raise ticket.error

    async def wait_async(self, ticket: CommitTicket | None) -> None:
        """:meth:`wait` for a coroutine: the event loop never blocks on the commit and no
        thread is taken per waiter.

        The coroutine parks a future on its ticket; if no flush is under way, one committer
        thread (per store) starts draining the queue — batch after batch, one transaction and
        one fsync each, while anything is queued — and resolves the futures of each batch as
        soon as it is committed. Requests that arrive during a flush are staged meanwhile and
        form the next batch, so the group commit is the same as with threads; threads that
        call :meth:`wait` share the queue and the flag that says a flush is under way."""
        if ticket is None:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._commit_cv:
            if not ticket.settled:
                ticket.waiters.append((loop, future))
                self._hand_over()
            else:
                future.set_result(None)
        await future
        if ticket.error is not None:
            raise ticket.error

    def _hand_over(self) -> None:
        """Start the committer thread if tickets with waiting coroutines are queued and no
        flush is under way (called with the condition held)."""
        if self._flushing or not self._queue or not any(t.waiters for t in self._queue):
            return
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="crowdbudget-commit")
        self._flushing = True
        self._committer.submit(self._drain)

    def _drain(self) -> None:
        """The committer thread: flush batches until the queue is empty (started by
        :meth:`_hand_over`, which set ``_flushing``)."""
        with self._commit_cv:
            try:
                while self._queue:
                    batch, self._queue = self._queue, []
                    self._commit_cv.release()
                    error: Exception | None = None
                    try:
                        self._flush(batch)
                    except Exception as exc:  # a bug, not a database error: fail the batch
                        error = exc
                    finally:
                        self._commit_cv.acquire()
                        self._wake(batch, error)
                        self._commit_cv.notify_all()
            finally:
                self._flushing = False
                self._commit_cv.notify_all()

    def _wake(self, batch: list[CommitTicket], error: Exception | None = None) -> None:
        """Resolve the futures of the tickets of ``batch`` after its flush: one call into
        each event loop per batch, not one per ticket. A ticket the flush left unsettled (it
        raised ``error``) is failed, so that no waiter takes it for committed."""
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        for ticket in batch:
            if not ticket.settled:
                self._fail(ticket, CrowdBudgetError(f"cannot write event: {error!r}"))
            if ticket.waiters:
                for loop, future in ticket.waiters:
                    by_loop.setdefault(loop, []).append(future)
                ticket.waiters = []
        for loop, futures in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_resolve, futures)

    def _conflict(self, ticket: CommitTicket) -> ConcurrentWriteError:
        event = ticket.event
        return ConcurrentWriteError(
            f"campaign {event.campaign_id!r} already has event {event.seq}; another process "
            "wrote to it — reload the campaign"
        )

    def _fail(self, ticket: CommitTicket, error: CrowdBudgetError) -> None:
        if isinstance(error, ConcurrentWriteError):
            self.note_foreign_write(ticket.event.campaign_id)
        ticket.error = error
        ticket.settled = True
        if ticket.epoch is not None:
            self._failed_epochs.add(ticket.epoch)

    def _flush(self, batch: list[CommitTicket]) -> None:
        """Append ``batch`` in order: one ``INSERT`` statement (one round trip, one
        transaction, one fsync) per :data:`ROWS_PER_STATEMENT` events when nothing collides,
        else event by event so that only the colliding events (and those staged after them
        on the same campaign object) fail.

        The writer connection is in autocommit mode: a single statement is atomic on its own,
        so no ``BEGIN`` and ``COMMIT`` round trips are spent on it. A batch is not one
        transaction (it never was a promise: a collision already made it event by event);
        what is promised is per event — committed when its ticket is settled, in order."""
        # one long-lived connection for appends (no pool checkout per batch); the write lock
        # keeps its statements apart from dispose()
        with self._write_lock:
            for start in range(0, len(batch), ROWS_PER_STATEMENT):
                self._flush_chunk(batch[start : start + ROWS_PER_STATEMENT])

    def _flush_chunk(self, chunk: list[CommitTicket]) -> None:
        live = []
        for ticket in chunk:
            if ticket.epoch is not None and ticket.epoch in self._failed_epochs:
                self._fail(ticket, self._conflict(ticket))
            else:
                live.append(ticket)
        if not live:
            return
        try:
            if self._writer is None:
                self._writer = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            writer = self._writer
            try:
                self._insert_rows(writer, [t.row for t in live])
                self.activity["flushes"] += 1
            except IntegrityError:
                pass
            else:
                for ticket in live:
                    ticket.settled = True
                return
            for ticket in live:  # a collision: find it, keep the rest
                if ticket.epoch is not None and ticket.epoch in self._failed_epochs:
                    self._fail(ticket, self._conflict(ticket))
                    continue
                try:
                    writer.execute(self._insert, _row_mapping(ticket.row))
                    self.activity["flushes"] += 1
                    ticket.settled = True
                except IntegrityError:
                    self.activity["collisions"] += 1
                    self._fail(ticket, self._conflict(ticket))
        except sa.exc.SQLAlchemyError as exc:
            if self._writer is not None:
                self._writer.invalidate()  # a broken connection: open a new one next time
                self._writer = None
            first = str(getattr(exc, "orig", None) or exc).splitlines()[0]
            for ticket in live:
                if not ticket.settled:
                    self._fail(ticket, CrowdBudgetError(f"cannot write event: {first}"))

    def _insert_rows(self, writer: sa.Connection, rows: list[tuple[Any, ...]]) -> None:
        """One ``INSERT … VALUES (…), (…), …`` statement for ``rows`` (atomic: all or none).

        Sent as the driver's own SQL with positional parameters when its placeholder style
        is ``?`` or ``%s`` (SQLite, psycopg): SQLAlchemy compiles a multi-row ``values()``
        construct anew for every batch, which cost 2.4-4x the CPU of the whole flush
        (0.9-3.6 ms against 0.3-0.9 ms per flush of 1-30 events on PostgreSQL) — a fixed cost
        per flush, so it grew with the number of processes sharing the load (smaller group
        commits). Other placeholder styles take the SQLAlchemy construct.

        The statement goes to a cursor of the writer's own driver connection (autocommit:
        the statement is its own transaction, committed — on SQLite with ``synchronous=FULL``
        synced — before ``execute`` returns, as through ``exec_driver_sql``, which adds an
        execution context and a result object per call); a driver error is raised as
        SQLAlchemy's wrapper of it (:class:`~sqlalchemy.exc.IntegrityError` for an event
        number taken), as ``exec_driver_sql`` raises it."""
        dialect = writer.dialect
        mark = _PLACEHOLDERS.get(dialect.paramstyle)
        if mark is None:
            writer.execute(EVENTS.insert().values([_row_mapping(row) for row in rows]))
            return
        statement = _insert_statement(mark, len(rows))
        parameters = rows[0] if len(rows) == 1 else tuple(v for row in rows for v in row)
        driver = dialect.loaded_dbapi
        try:
            cursor = writer.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.execute(statement, parameters)
            finally:
                cursor.close()
        except driver.Error as exc:
            raise sa.exc.DBAPIError.instance(
                statement, parameters, exc, driver.Error, dialect=dialect
            ) from exc

    def events(self, campaign_id: str, after: int = 0) -> Iterator[StoredEvent]:
        """The campaign's events with ``seq > after``, in order."""
        query = (
            sa.select(EVENTS)
            .where(EVENTS.c.campaign_id == campaign_id, EVENTS.c.seq > after)
            .order_by(EVENTS.c.seq)
        )
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                yield StoredEvent(
                    row.campaign_id, row.seq, row.kind, json.loads(row.payload), row.created_at
                )

    def events_after(self, campaign_id: str, after: int) -> list[StoredEvent]:
        """The campaign's events with ``seq > after``, in order, read on one long-lived
        connection (a catch-up: usually empty). One indexed range read of the primary key
        (``campaign_id``, ``seq``): it is both the freshness check and the catch-up, so a
        copy that is current pays one query and one that is behind no second one."""
        query = (
            sa.select(EVENTS)
            .where(EVENTS.c.campaign_id == campaign_id, EVENTS.c.seq > after)
            .order_by(EVENTS.c.seq)
        )
        with self._read_lock:
            try:
                if self._reader is None:
                    # autocommit: each read sees what is committed now (an open read
                    # transaction would pin SQLite's snapshot), with no BEGIN or ROLLBACK
                    self._reader = self.engine.connect().execution_options(
                        isolation_level="AUTOCOMMIT"
                    )
                rows = self._reader.execute(query).all()
            except sa.exc.SQLAlchemyError:
                if self._reader is not None:
                    self._reader.invalidate()
                    self._reader = None
                raise
        self.activity["catch_ups"] += 1
        self.activity["caught_up_events"] += len(rows)
        if rows:
            self.note_foreign_write(campaign_id)
        return [
            StoredEvent(row.campaign_id, row.seq, row.kind, json.loads(row.payload), row.created_at)
            for row in rows
        ]

    def note_foreign_write(self, campaign_id: str) -> None:
        """Record that another process wrote to the campaign (see :meth:`shared`)."""
        self._foreign_writes[campaign_id] = time.monotonic()

    def shared(self, campaign_id: str) -> bool:
        """Whether another process wrote to the campaign within the last
        :data:`SHARED_SECONDS` as far as this process saw (an event it caught up with, or a
        race for an event number it lost). The caller then catches up before each decision
        (a cost of one read per decision, paid only while the campaign is shared)."""
        seen = self._foreign_writes.get(campaign_id)
        return seen is not None and time.monotonic() - seen < SHARED_SECONDS

    async def hold_async(self, campaign_id: str) -> CampaignHold | None:
        """On PostgreSQL, while the campaign is :meth:`shared`: wait (in a worker thread,
        at most :data:`HOLD_TIMEOUT_SECONDS`) for the campaign's session advisory lock and
        return it; else None at once. The caller holds it across its decision and the
        commit of the decision's events, and gives it back with :meth:`release` on every
        path; so other processes' decisions on the campaign wait instead of racing for the
        same event number. A coroutine cancelled while waiting leaves nothing held."""
        if not self._advisory or not self.shared(campaign_id):
            return None
        if self._holders is None:
            self._holders = ThreadPoolExecutor(_HOLDERS, thread_name_prefix="crowdbudget-hold")
            self._releaser = ThreadPoolExecutor(1, thread_name_prefix="crowdbudget-release")
            timeout_ms = int(HOLD_TIMEOUT_SECONDS * 1000)
            self._lock_engine = sa.create_engine(
                self.url,
                pool_size=_HOLDERS,
                max_overflow=_HOLDERS,
                pool_timeout=HOLD_TIMEOUT_SECONDS,
                isolation_level="AUTOCOMMIT",
                connect_args={"options": f"-c lock_timeout={timeout_ms}"},
            )
        future = asyncio.get_running_loop().run_in_executor(self._holders, self._hold, campaign_id)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # the wait goes on in its thread: give the lock back once it is taken
            future.add_done_callback(
                lambda done: None if done.cancelled() else self.release(done.result())
            )
            raise

    def _hold(self, campaign_id: str) -> CampaignHold | None:
        digest = hashlib.blake2b(campaign_id.encode(), digest_size=8).digest()
        key = int.from_bytes(digest, "big", signed=True)  # advisory lock keys are bigints
        assert self._lock_engine is not None
        try:
            connection = self._lock_engine.connect()
        except sa.exc.SQLAlchemyError:
            return None
        try:
            connection.execute(sa.text("SELECT pg_advisory_lock(:key)"), {"key": key})
        except sa.exc.SQLAlchemyError:
            connection.invalidate()  # the lock (if any) goes with the session
            connection.close()
            return None  # timed out, or the database failed: decide without the lock
        self.activity["holds"] += 1
        return CampaignHold(key, connection)

    def release(self, hold: CampaignHold | None) -> None:
        """Give back a lock taken by :meth:`hold_async` (None: nothing). Returns at once:
        the unlock is sent from a worker thread."""
        if hold is not None and self._releaser is not None:
            self._releaser.submit(self._release, hold)

    @staticmethod
    def _release(hold: CampaignHold) -> None:
        try:
            hold.connection.execute(sa.text("SELECT pg_advisory_unlock(:key)"), {"key": hold.key})
        except sa.exc.SQLAlchemyError:
            hold.connection.invalidate()  # closing the session frees its locks
        hold.connection.close()

    def campaign_ids(self) -> list[str]:
        """Every campaign in the store (those with a ``created`` event), oldest first."""
        query = (
            sa.select(EVENTS.c.campaign_id)
            .where(EVENTS.c.kind == "created")
            .order_by(EVENTS.c.created_at)
        )
        with self.engine.connect() as conn:
            return [row.campaign_id for row in conn.execute(query)]

    def dispose(self) -> None:
        for pool in (self._holders, self._releaser):
            if pool is not None:
                pool.shutdown(wait=True)
        self._holders = self._releaser = None
        if self._lock_engine is not None:
            self._lock_engine.dispose()
            self._lock_engine = None
        if self._committer is not None:
            self._committer.shutdown(wait=True)
            self._committer = None
        with self._write_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        with self._read_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        self.engine.dispose()


def _resolve(futures: list[asyncio.Future[None]]) -> None:
    """Runs on the waiters' event loop (a future may be done already: a cancelled request)."""
    for future in futures:
        if not future.done():
            future.set_result(None)
