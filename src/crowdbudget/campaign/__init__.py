"""Live campaigns: the :class:`Campaign` object and its append-only event store."""

from crowdbudget.campaign.campaign import (
    AssignmentError,
    Campaign,
    CampaignConfig,
    PendingAssignment,
    UnknownAssignmentError,
)
from crowdbudget.campaign.read_models import CampaignReadModel
from crowdbudget.campaign.store import ConcurrentWriteError, EventStore, StoredEvent

__all__ = [
    "AssignmentError",
    "Campaign",
    "CampaignConfig",
    "CampaignReadModel",
    "ConcurrentWriteError",
    "EventStore",
    "PendingAssignment",
    "StoredEvent",
    "UnknownAssignmentError",
]
