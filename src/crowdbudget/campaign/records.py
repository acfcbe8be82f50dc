"""A live campaign's assignments as records (DESIGN §5): the public
:class:`PendingAssignment` (string ids), the in-memory :class:`AssignmentRecord` (indices)
and the errors of an operation naming an assignment that cannot take it.

An assignment's ``status`` is ``pending`` until it is answered (``answered``, with its
label), given back (``cancelled``) or left unanswered past its time-to-live (``expired``);
only a pending assignment takes a label or a cancellation, and the same answer twice is
recorded once (:meth:`AssignmentRecord.check_label`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crowdbudget.exceptions import CrowdBudgetError


class AssignmentError(CrowdBudgetError):
    """A label or cancellation names an assignment that cannot take it (unknown, expired,
    cancelled, another worker's, or already answered differently)."""


class UnknownAssignmentError(AssignmentError, KeyError):
    """No such assignment in this campaign."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class PendingAssignment:
    """One assignment as the outside world sees it (string ids)."""

    assignment_id: str
    item_id: str
    worker_id: str
    price: float
    expires_at: float | None
    status: str = "pending"  # pending | answered | cancelled | expired
    label: str | None = None


@dataclass(slots=True)
class AssignmentRecord:
    """One assignment inside the campaign: item and worker indices, the price it committed,
    when it expires (None: never), its status and its label (a class index, once answered).
    """

    item: int
    worker: int
    price: float
    expires_at: float | None
    status: str = "pending"
    label: int | None = None

    def check_label(
        self, assignment_id: str, code: int, clock: Callable[[], float], classes: Sequence[str]
    ) -> bool:
        """Whether the answer ``code`` (a class index) is new: False for a retry of the same
        answer; :class:`AssignmentError` when the assignment takes no label (answered
        differently, expired by ``clock()`` though not yet released, cancelled or expired)."""
        if self.status == "answered":
            if self.label == code:
                return False
            raise AssignmentError(
                f"assignment {assignment_id!r} was already answered with "
                f"{classes[self.label or 0]!r}"
            )
        expired = self.expires_at is not None and self.expires_at <= clock()
        if self.status == "pending" and expired:
            # refused without writing: the expiry itself is recorded by the next
            # housekeeping (expire_overdue), not by a refused request
            raise AssignmentError(f"assignment {assignment_id!r} is expired; it takes no label")
        if self.status != "pending":
            raise AssignmentError(
                f"assignment {assignment_id!r} is {self.status}; it takes no label"
            )
        return True

    def public(
        self,
        assignment_id: str,
        item_ids: Sequence[str],
        worker_ids: Sequence[str],
        classes: Sequence[str],
    ) -> PendingAssignment:
        """The record as a :class:`PendingAssignment`: its indices as the campaign's
        ``item_ids``, ``worker_ids`` and ``classes``."""
        return PendingAssignment(
            assignment_id=assignment_id,
            item_id=item_ids[self.item],
            worker_id=worker_ids[self.worker],
            price=self.price,
            expires_at=self.expires_at,
            status=self.status,
            label=None if self.label is None else classes[self.label],
        )
