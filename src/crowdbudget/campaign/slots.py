"""A label answering an assignment another worker holds: a platform's open slot.

A platform that lets any annotator take an open task (Label Studio's ``/next``) cannot name the
annotator when the campaign commits budget for one more label on an item; the assignment is
held by a placeholder worker (the *slot*). When the annotation arrives, :func:`record_answer`
settles the slot with the real annotator's label, one ``labeled`` event whose payload names the
answerer (``"worker"``): the holder's reservation is paid (committed → spent, at the holder's
price, so the ledger stays exact) and released from the holder (the item is no longer theirs),
and the label is the answerer's own — the policy, the verdict, the export and the control
tasks' evidence (a label on a control item is the answerer's control answer, which may block
them: :mod:`crowdbudget.campaign.control`) read it under the answerer's id, exactly as a label
of an assignment the answerer held (:func:`apply_answer`).

Refused, with nothing stored: an answerer who already holds or labeled the item (one label per
worker and item), and whatever :meth:`Campaign.record_label` refuses (unknown, expired,
cancelled, answered differently). The same answer again is recorded once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crowdbudget._validation import short_repr
from crowdbudget.campaign.config import check_ids, class_code
from crowdbudget.campaign.records import AssignmentError, AssignmentRecord, PendingAssignment
from crowdbudget.types import Assignment

if TYPE_CHECKING:
    from crowdbudget.campaign.campaign import Campaign

__all__ = ["apply_answer", "record_answer"]


def record_answer(
    campaign: Campaign, assignment_id: str, label: str, answered_by: str
) -> PendingAssignment:
    """Answer the pending assignment ``assignment_id`` with ``label`` given by worker
    ``answered_by`` (module docstring); the holder answering is a plain
    :meth:`Campaign.record_label`."""
    record = campaign._record(assignment_id)
    answerer_id = check_ids([answered_by], "worker")[0]
    if answerer_id == campaign.worker_ids[record.worker]:
        return campaign.record_label(assignment_id, label)
    classes = campaign.config.classes
    code = class_code(label, campaign._class_index, classes, f"label {short_repr(label)}")
    if record.check_label(assignment_id, code, campaign.clock, classes):
        answerer = campaign._worker_index.get(answerer_id)
        if answerer is not None and record.item in campaign._live.worker_items.get(answerer, ()):
            raise AssignmentError(
                f"worker {short_repr(answerer_id)} already holds or labeled item "
                f"{short_repr(campaign.item_ids[record.item])}"
            )
        campaign._commit("labeled", {"id": assignment_id, "label": code, "worker": answerer_id})
        campaign._record_blocks()  # a control answer may block the answerer
    return campaign.assignment(assignment_id)


def apply_answer(
    campaign: Campaign, assignment_id: str, record: AssignmentRecord, payload: dict[str, Any]
) -> None:
    """Apply a ``labeled`` event naming its answerer (the ledger is moved by the caller)."""
    # the answerer may join here, which may rebuild the policy on more worker slots (it
    # copies the pending work): join first, release and observe on the rebuilt state after
    answerer = campaign._worker(str(payload["worker"]))
    held = Assignment(record.item, record.worker, record.price)
    campaign.state.release_assignment(held)
    campaign._live.released(campaign.state, assignment_id, held)
    # a label without a pending assignment of the answerer's, at the price the holder reserved
    campaign._observe(record.item, answerer, record.label or 0, record.price, key=None)
