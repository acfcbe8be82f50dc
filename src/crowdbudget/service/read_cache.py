"""Answers of the read endpoints kept per campaign event count, so a repeated read costs
nothing.

A campaign's results, status, calibration and dashboard data are functions of its events
(and the query's parameters): while :attr:`~crowdbudget.campaign.Campaign.event_count` is
unchanged, the answer is too. :class:`ReadCache` keeps the encoded JSON answer under ``(campaign id,
endpoint, parameters)`` together with the event count it was computed at; a read at another
count recomputes and replaces it, so each key holds one answer, the latest. The total size of
the answers is bounded (least recently used dropped first); an answer larger than the whole
bound is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable


class ReadCache:
    """Encoded answers, at most ``max_bytes`` in total (thread-safe; LRU).

    Keys are ``(campaign id, endpoint, parameters)`` tuples; each holds one answer and the
    event count it is valid at."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = int(max_bytes)
        self._answers: OrderedDict[Hashable, tuple[int, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, event_count: int) -> bytes | None:
        """The answer kept for ``key`` at ``event_count``, or None."""
        with self._lock:
            kept = self._answers.get(key)
            if kept is None or kept[0] != event_count:
                return None
            self._answers.move_to_end(key)
            return kept[1]

    def put(self, key: Hashable, event_count: int, answer: bytes) -> None:
        """Keep ``answer`` for ``key`` at ``event_count`` (replacing the one kept before, if
        it is not for a later count), dropping the least recently used beyond the bound."""
        if len(answer) > self.max_bytes:
            return
        with self._lock:
            kept = self._answers.pop(key, None)
            if kept is not None:
                self._bytes -= len(kept[1])
                if kept[0] > event_count:  # a slower read of an older state finished last
                    self._answers[key] = kept
                    self._bytes += len(kept[1])
                    return
            self._answers[key] = (event_count, answer)
            self._bytes += len(answer)
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._answers.popitem(last=False)
                self._bytes -= len(dropped)

    def __len__(self) -> int:
        return len(self._answers)

    @property
    def n_bytes(self) -> int:
        """The total size of the answers kept."""
        return self._bytes
