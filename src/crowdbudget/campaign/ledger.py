"""A live campaign's money in exact decimal arithmetic (DESIGN §5): the authority on
affordability.

Float sums of prices drift (0.1 + 0.1 + 0.1 > 0.3), and a tolerance to absorb the drift would
let spending pass the budget by that much. Prices and the budget are decimal numbers as the
requester typed them, so their sums are exact here: a budget of 1 at 0.1 a label pays exactly
10 labels and ``spent + committed`` never exceeds the budget, not even by 1e-9. (The float
state the policies read, :class:`~crowdbudget.types.CampaignState`, follows along; its drift is
far below its own 1e-9 slack, so it never refuses what the ledger allows.)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal


@functools.lru_cache(maxsize=4096)
def exact_decimal(value: float) -> Decimal:
    """A price or budget as the decimal number it was written as (``0.1`` is one tenth, not
    the binary float nearest to it): its shortest repr, which round-trips exactly. Cached:
    a campaign has few distinct prices, and this runs on every assignment and label."""
    return Decimal(repr(float(value)))


@dataclass(slots=True)
class Ledger:
    """The budget, the money spent on labels received and the money committed to pending
    assignments, all exact decimals (see the module docstring).

    Invariant kept by its user (:class:`~crowdbudget.campaign.Campaign`): an assignment is
    handed out only when :meth:`can_afford` its price, so ``spent + committed <= budget``."""

    budget: Decimal
    spent: Decimal = Decimal(0)
    committed: Decimal = Decimal(0)

    def can_afford(self, price: float) -> bool:
        """Whether one more assignment at ``price`` keeps ``spent + committed`` within the
        budget."""
        return self.spent + self.committed + exact_decimal(price) <= self.budget

    @property
    def remaining(self) -> Decimal:
        """The budget neither spent nor committed."""
        return self.budget - self.spent - self.committed

    @classmethod
    def of(cls, budget: float) -> Ledger:
        """A fresh ledger for ``budget`` (nothing spent or committed)."""
        return cls(exact_decimal(budget))

    def commit(self, price: float) -> None:
        """An assignment at ``price`` was handed out: its money is committed."""
        self.committed += exact_decimal(price)

    def release(self, price: float) -> None:
        """A pending assignment at ``price`` was cancelled or expired: its money returns."""
        self.committed -= exact_decimal(price)

    def settle(self, price: float) -> None:
        """A pending assignment at ``price`` was answered: its committed money is spent."""
        amount = exact_decimal(price)
        self.committed -= amount
        self.spent += amount
