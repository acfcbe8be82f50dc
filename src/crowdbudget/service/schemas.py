"""Request and response bodies of the HTTP API (pydantic models; the OpenAPI schema).

Request models are strict: an unknown field is refused (a typo such as ``"polcy"`` must not
silently run the default policy), numbers must be JSON numbers (``"budget": true`` or
``"budget": "4"`` are refused, not read as 1 and 4), JSON's NaN / Infinity extensions are
refused. Lengths that do not depend on the operator's settings are declared here; the others
(items per request, id and label length, number of classes) are checked against
:class:`~crowdbudget.service.settings.ServiceSettings` by the routes.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from crowdbudget.campaign import PendingAssignment

#: the longest campaign name and the longest worker id a request may carry
MAX_NAME_LENGTH = 200


class StrictRequest(BaseModel):
    """Base of request bodies: strict types, no unknown fields, no NaN or infinity."""

    model_config = ConfigDict(allow_inf_nan=False, extra="forbid", strict=True)


RequestT = TypeVar("RequestT", bound=StrictRequest)


class CampaignCreate(StrictRequest):
    items: list[str] = Field(min_length=1, description="item ids (unique strings)")
    budget: float = Field(gt=0, description="label units, or money with worker prices")
    classes: list[str] = Field(default=["0", "1"], min_length=2)
    policy: str = Field(default="opt-kg", min_length=1, description="a policy id")
    prior: list[float] | None = None
    worker_prices: dict[str, float] = Field(default_factory=dict)
    worker_capacities: dict[str, int] = Field(
        default_factory=dict, description="the most labels a worker may give (others: no limit)"
    )
    workers: list[str] = Field(
        default_factory=list,
        description="worker ids known from the start (more join by asking for work or by "
        "getting a token); a policy that models workers numbers them in this order",
    )
    mode: Literal["pull", "push"] = Field(
        default="pull",
        description="'pull': workers ask for work; 'push': the policy picks (item, worker) "
        "pairs among the team (POST .../push with 'count')",
    )
    pairs: list[Annotated[list[str], Field(min_length=2, max_length=2)]] | None = Field(
        default=None,
        description="push mode: the (item id, worker id) pairs that may be asked, each once "
        "(default: every item with every worker)",
    )
    contexts: list[int] | None = Field(
        default=None,
        description="the context (task type) of each item, integers >= 0, aligned with items",
    )
    features: list[list[float]] | None = Field(
        default=None, description="a feature vector per item, aligned with items"
    )
    default_price: float = Field(default=1.0, gt=0)
    ttl: float | None = Field(
        default=None,
        gt=0,
        description="seconds before an unanswered assignment expires (default: the server's)",
    )
    seed: int = Field(default=0, ge=0, lt=2**63)
    name: str = Field(default="", max_length=MAX_NAME_LENGTH)
    max_labels_per_item: int | None = Field(default=None, ge=1)
    max_pending_per_worker: int | None = Field(
        default=None,
        ge=1,
        description="unanswered assignments one worker may hold (default: the server's)",
    )
    verdict: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="final labels and confidence: 'posterior' (the policy's model) or an "
        "aggregator id ('ds', 'one-coin-em', 'mv', ...); default: the one the policy id "
        "names, else the policy's default (its own model for most; the default verdict, "
        "'bds', for the worker-aware one-coin policies)",
    )
    control: ControlCreate | None = Field(
        default=None, description="control tasks: items of known answer, rule and blocking"
    )


class ControlItem(StrictRequest):
    """One control item: a campaign item id and its known answer (one of the campaign's
    classes). ``POST …/control/items`` takes a list of these."""

    item: str = Field(min_length=1, description="an item id of the campaign")
    label: str = Field(min_length=1, description="the item's known answer")


class ControlSettings(StrictRequest):
    """The control rule and blocking (``PATCH …/control``: the fields given change; ranges
    are checked by the campaign, crowdbudget.campaign.control)."""

    first_k: int | None = Field(default=None, description="every worker's first tasks")
    rate: float | None = Field(default=None, description="then this share of their tasks")
    block_below: float | None = Field(
        default=None, description="the accuracy level a worker must reach (null: no blocking)"
    )
    block_confidence: float | None = Field(
        default=None, description="the posterior probability of being below it that blocks"
    )
    min_answers: int | None = Field(default=None, description="control answers before a block")
    prior: list[float] | None = Field(default=None, description="Beta prior (alpha, beta)")
    rule: Literal["fixed", "value"] | None = Field(
        default=None,
        description="after the first tasks: the fixed rate, or 'value' (a control task when "
        "its answer is worth more to the block decision than the label it displaces; needs "
        "block_below)",
    )
    horizon: int | None = Field(default=None, description="the value rule's look-ahead (20)")
    blocked_labels: Literal["drop", "keep"] | None = Field(
        default=None, description="the verdict drops or keeps blocked workers' labels"
    )

    def given(self) -> dict[str, object]:
        """The fields the request set (a ``null`` block_below among them: stop blocking)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


class BlockRequest(StrictRequest):
    """``PUT …/blocked-workers/{worker}``'s optional body: the requester's reason."""

    reason: str | None = Field(
        default=None,
        description="why the worker is blocked: one line, 1 to 200 characters (stored in the "
        "event, shown in the status and the blocked workers)",
    )


class ControlCreate(ControlSettings):
    """Control tasks at creation: the settings, and the control items."""

    items: list[ControlItem] | None = Field(default=None, description="control items")


class CampaignCreated(BaseModel):
    campaign_id: str
    requester_key: str


class CampaignSettingsUpdate(StrictRequest):
    """Settings a requester may change while the campaign runs (new assignments only)."""

    ttl: float | None = Field(default=None, gt=0)
    max_pending_per_worker: int | None = Field(default=None, ge=1)


class RequesterKey(BaseModel):
    campaign_id: str
    requester_key: str


class ItemsAdd(StrictRequest):
    items: list[str] = Field(min_length=1)
    contexts: list[int] | None = None
    features: list[list[float]] | None = None


class WorkerCreate(StrictRequest):
    worker_id: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)


class TeamPush(StrictRequest):
    """Either ``worker_ids`` (one assignment per listed worker, the policy picking items) or
    ``count`` (push mode: up to that many assignments, the policy picking the workers)."""

    worker_ids: list[str] | None = Field(default=None, min_length=1, max_length=10_000)
    count: int | None = Field(default=None, ge=1, le=10_000)


class WorkerToken(BaseModel):
    worker_id: str
    worker_token: str


class WorkerRevoked(BaseModel):
    worker_id: str
    revoked_tokens: int
    cancelled_assignments: int


class LabelSubmit(StrictRequest):
    label: str


class GoldLabel(StrictRequest):
    """One gold label: a campaign item id and its true class (one of the campaign's
    classes). ``PUT …/gold`` takes a list of these (at most one per item) and replaces the
    campaign's gold; ``GET …/gold`` returns the same list."""

    item: str = Field(min_length=1, description="an item id of the campaign")
    label: str = Field(min_length=1, description="the item's true class")


class AssignmentOut(BaseModel):
    assignment_id: str
    item_id: str
    worker_id: str
    price: float
    expires_at: float | None
    status: str
    label: str | None = None


def assignment_out(a: PendingAssignment) -> AssignmentOut:
    return AssignmentOut(**{k: getattr(a, k) for k in AssignmentOut.model_fields})
