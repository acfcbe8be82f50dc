"""The event store's group commit: concurrent appends share statements, nothing staged is
lost or reordered, and a collision fails exactly the events decided on the stale state; a
catch-up reads only the new events, and a shared campaign is held by one decision at a time."""

from __future__ import annotations

import asyncio
import threading

import pytest

from crowdbudget.campaign import ConcurrentWriteError, EventStore
from crowdbudget.campaign import store as store_module


def test_concurrent_appends_are_all_committed_in_order(tmp_path) -> None:
    store = EventStore(f"sqlite:///{tmp_path / 'events.db'}")
    n_threads, per_thread = 8, 40
    lock = threading.Lock()
    next_seq = iter(range(1, n_threads * per_thread + 1))

    def writer(k: int) -> None:
        for _ in range(per_thread):
            with lock:  # the campaign lock: sequence numbers are handed out in order
                seq = next(next_seq)
                ticket = store.stage("c", seq, "labeled", {"by": k, "seq": seq})
            store.wait(ticket)  # outside the lock, as the service does

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = list(EventStore(store.url).events("c"))
    assert [e.seq for e in events] == list(range(1, n_threads * per_thread + 1))
    assert all(e.payload["seq"] == e.seq for e in events)


def test_collision_fails_the_stale_epoch_only(db_url: str) -> None:
    """On each backend: a multi-row statement with a colliding row writes none of its rows,
    and the event-by-event retry keeps the rows that do not collide."""
    mine, other = EventStore(db_url), EventStore(db_url)
    other.append("a", 1, "created", {})  # another process wrote event 1 of campaign a first
    stale_1 = mine.stage("a", 1, "created", {}, epoch=7)
    stale_2 = mine.stage("a", 2, "assigned", {}, epoch=7)  # decided on the stale event 1
    unrelated = mine.stage("b", 1, "created", {}, epoch=8)
    with pytest.raises(ConcurrentWriteError, match="reload the campaign"):
        mine.wait(stale_2)
    assert "already has event 1" in str(stale_1.error)
    assert isinstance(stale_2.error, ConcurrentWriteError)
    mine.wait(unrelated)  # another campaign in the same batch is committed
    assert [e.seq for e in other.events("a")] == [1]  # stale event 2 never reached the store
    assert [e.seq for e in other.events("b")] == [1]
    # a later event under the failed epoch fails without touching the database
    with pytest.raises(ConcurrentWriteError):
        mine.wait(mine.stage("a", 2, "assigned", {}, epoch=7))
    assert [e.seq for e in other.events("a")] == [1]
    # a fresh copy (new epoch) appends normally
    mine.wait(mine.stage("a", 2, "assigned", {}, epoch=9))
    assert [e.seq for e in other.events("a")] == [1, 2]
    mine.dispose()
    other.dispose()


def test_plain_append_after_a_collision_can_retry(tmp_path) -> None:
    """Library use (no epoch): a lost race raises, the caller reloads and appends again."""
    url = f"sqlite:///{tmp_path / 'events.db'}"
    mine, other = EventStore(url), EventStore(url)
    other.append("a", 1, "created", {})
    with pytest.raises(ConcurrentWriteError):
        mine.append("a", 1, "created", {})
    assert mine.append("a", 2, "labeled", {}).seq == 2


def test_coroutines_and_threads_share_the_group_commit(tmp_path) -> None:
    """``wait_async`` (the service's hot endpoints) and ``wait`` (threads) on one queue: every
    event is committed in order, every waiter returns, and coroutines share transactions."""
    import asyncio

    store = EventStore(f"sqlite:///{tmp_path / 'events.db'}")
    lock = threading.Lock()
    seqs = iter(range(1, 10_000))
    flushes: list[int] = []
    flush = store._flush

    def counting_flush(batch: list) -> None:
        flushes.append(len(batch))
        flush(batch)

    store._flush = counting_flush

    def stage(by: str) -> object:
        with lock:
            seq = next(seqs)
            return store.stage("c", seq, "labeled", {"by": by, "seq": seq})

    def thread_writer(k: int) -> None:
        for _ in range(20):
            store.wait(stage(f"t{k}"))

    async def coroutine_writer(k: int) -> None:
        for _ in range(20):
            await store.wait_async(stage(f"a{k}"))

    async def main() -> None:
        await asyncio.gather(*(coroutine_writer(k) for k in range(16)))

    threads = [threading.Thread(target=thread_writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    asyncio.run(main())
    for t in threads:
        t.join()
    events = list(EventStore(store.url).events("c"))
    assert [e.seq for e in events] == list(range(1, 20 * 20 + 1))
    assert all(e.payload["seq"] == e.seq for e in events)
    assert sum(flushes) == 400 and len(flushes) < 400  # batches were shared
    store.dispose()


def test_wait_async_raises_a_collision_and_a_failed_flush(tmp_path) -> None:
    import asyncio

    from crowdbudget.exceptions import CrowdBudgetError

    url = f"sqlite:///{tmp_path / 'events.db'}"
    mine, other = EventStore(url), EventStore(url)
    other.append("a", 1, "created", {})
    with pytest.raises(ConcurrentWriteError):
        asyncio.run(mine.wait_async(mine.stage("a", 1, "created", {}, epoch=3)))

    def broken(batch: list) -> None:
        raise RuntimeError("disk on fire")

    mine._flush = broken
    ticket = mine.stage("b", 1, "created", {}, epoch=4)
    with pytest.raises(CrowdBudgetError, match="disk on fire"):  # never taken for durable
        asyncio.run(mine.wait_async(ticket))
    assert list(other.events("b")) == []
    mine.dispose()


def test_stores_opened_together_on_a_new_database_all_open(db_url: str) -> None:
    """Several processes started at once on a new database each create the schema; the
    loser of the check-then-create race used to fail ("table events already exists")."""
    from crowdbudget.service import create_app

    n = 6
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def open_store() -> None:
        barrier.wait()
        try:
            create_app(db_url).state.service.store.dispose()  # events and credentials
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    store = EventStore(db_url)
    store.append("c", 1, "created", {})
    assert [e.seq for e in store.events("c")] == [1]
    store.dispose()


def test_a_batch_over_one_statement_keeps_order_and_fails_the_stale_epoch_only(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch is written in statements of ``ROWS_PER_STATEMENT`` events; a collision in a
    later statement fails its event and the ones decided after it on the same copy, and
    nothing else (earlier statements are committed, later campaigns too)."""
    monkeypatch.setattr(store_module, "ROWS_PER_STATEMENT", 3)
    mine, other = EventStore(db_url), EventStore(db_url)
    other.append("a", 5, "labeled", {})  # another process wrote event 5 of campaign a
    tickets = [mine.stage("a", seq, "labeled", {}, epoch=1) for seq in range(1, 8)]
    unrelated = [mine.stage("b", seq, "labeled", {}, epoch=2) for seq in range(1, 4)]
    mine.wait(unrelated[-1])  # flushes the whole batch
    assert [t.error is None for t in tickets] == [True] * 4 + [False] * 3
    assert all(t.settled and t.error is None for t in unrelated)
    assert [e.seq for e in other.events("a")] == [1, 2, 3, 4, 5]
    assert [e.seq for e in other.events("b")] == [1, 2, 3]
    assert mine.activity["collisions"] == 1  # event 5; 6 and 7 fail with it, unwritten
    mine.dispose()
    other.dispose()


def test_catching_up_reads_only_the_new_events_and_marks_the_campaign_shared(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'events.db'}"
    mine, other = EventStore(url), EventStore(url)
    mine.append("a", 1, "created", {"n": 1})
    assert mine.events_after("a", 1) == [] and not mine.shared("a")
    other.append("a", 2, "labeled", {"n": 2})
    other.append("a", 3, "labeled", {"n": 3})
    caught_up = mine.events_after("a", 1)
    assert [(e.seq, e.payload["n"]) for e in caught_up] == [(2, 2), (3, 3)]
    assert mine.shared("a") and not mine.shared("b") and not other.shared("a")
    assert mine.activity["caught_up_events"] == 2 and mine.activity["catch_ups"] == 2
    # a lost race marks the campaign shared too
    with pytest.raises(ConcurrentWriteError):
        other.append("a", 3, "labeled", {})
    assert other.shared("a")


def test_a_shared_campaign_is_held_by_one_decision_at_a_time(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a decision on a shared campaign holds its advisory lock: a second
    process's decision waits for it (and goes ahead without it after the timeout); on
    SQLite, or for a campaign no other process writes, nothing is held."""
    monkeypatch.setattr(store_module, "HOLD_TIMEOUT_SECONDS", 0.3)
    mine, other = EventStore(db_url), EventStore(db_url)
    try:
        assert asyncio.run(mine.hold_async("a")) is None  # not shared: no lock, no query
        for store in (mine, other):
            store.note_foreign_write("a")
        held = asyncio.run(mine.hold_async("a"))
        if not db_url.startswith("postgresql"):
            assert held is None
            return
        assert held is not None
        assert asyncio.run(other.hold_async("a")) is None  # waited 0.3 s, then gave up
        assert asyncio.run(other.hold_async("b")) is None  # "b" is not shared
        other.note_foreign_write("b")
        held_b = asyncio.run(other.hold_async("b"))  # another campaign: its own lock
        assert held_b is not None
        mine.release(held)
        mine.dispose()  # waits for the release to be sent
        again = asyncio.run(other.hold_async("a"))
        assert again is not None
        other.release(again)
        other.release(held_b)
    finally:
        mine.dispose()
        other.dispose()


def test_a_payload_is_stored_as_compact_json_dumps_text(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``payload`` column holds ``json.dumps(payload, separators=(",", ":"))`` byte for
    byte (non-ASCII escaped, floats by repr, keys in order, non-finite numbers as JSON's
    extension), whatever the encoder the store keeps — its C encoder or, where there is none,
    the Python one; read back, it is the payload."""
    import json

    import sqlalchemy as sa

    payloads = [
        {},
        {"id": "0f" * 16, "item": 3, "worker": 'wé ☃ "q"', "price": 0.1, "expires_at": None},
        {"rows": [[1, "w", 0], [2, "v", 1]], "big": 1e300, "tiny": 5e-324, "neg": -0.0},
        {"z": 1, "a": [True, False, None], "rng": [["0x1f", "0xabc", 0, 0]], "nan": float("nan")},
    ]
    store = EventStore(db_url)
    try:
        for seq, payload in enumerate(payloads, start=1):
            store.append("c", seq, "labeled", payload)
        query = sa.text("SELECT payload FROM events WHERE campaign_id = 'c' ORDER BY seq")
        with store.engine.connect() as connection:
            stored = [row[0] for row in connection.execute(query)]
        assert stored == [json.dumps(p, separators=(",", ":")) for p in payloads]
        assert store_module._C_PAYLOAD_ENCODER is not None  # CPython: the C encoder is used
        monkeypatch.setattr(store_module, "_C_PAYLOAD_ENCODER", None)
        assert [store_module.encode_payload(p) for p in payloads] == stored
        back = [e.payload for e in store.events("c")]
        assert back[:3] == payloads[:3] and back[3]["z"] == 1
    finally:
        store.dispose()


def test_a_broken_writer_connection_fails_its_events_and_the_next_one_is_new(tmp_path) -> None:
    """A driver error on the writer's connection (here: the connection closed under it) fails
    the events of that flush with the store's one-line error — never taken for durable — and
    the next append opens a new connection and is committed; the events table holds exactly
    the acknowledged events."""
    from crowdbudget.exceptions import CrowdBudgetError

    url = f"sqlite:///{tmp_path / 'events.db'}"
    store = EventStore(url)
    store.append("c", 1, "created", {})
    assert store._writer is not None
    store._writer.connection.dbapi_connection.close()  # type: ignore[union-attr]
    with pytest.raises(CrowdBudgetError, match="cannot write event"):
        store.append("c", 2, "labeled", {"n": 2})
    assert store._writer is None  # dropped: the next flush opens a new one
    store.append("c", 2, "labeled", {"n": 2})
    reader = EventStore(url)
    assert [(e.seq, e.payload) for e in reader.events("c")] == [(1, {}), (2, {"n": 2})]
    reader.dispose()
    store.dispose()
