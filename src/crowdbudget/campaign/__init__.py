"""Live campaigns: the :class:`Campaign` object and its append-only event store."""

from crowdbudget.campaign.campaign import (
    AssignmentError,
    Campaign,
    CampaignConfig,
    PendingAssignment,
    UnknownAssignmentError,
)
from crowdbudget.campaign.store import ConcurrentWriteError, EventStore, StoredEvent

__all__ = [
    "AssignmentError",
    "Campaign",
    "CampaignConfig",
    "ConcurrentWriteError",
    "EventStore",
    "PendingAssignment",
    "StoredEvent",
    "UnknownAssignmentError",
]
