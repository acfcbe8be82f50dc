"""Typed errors of crowdbudget.

Every error a user can cause derives from :class:`CrowdBudgetError`; its message is one line
that says what is wrong and what is allowed. The command-line tool prints that line and exits
with status 2 (no traceback). Errors that also fit a builtin category inherit from it too
(``ValueError``, ``KeyError``), so generic ``except ValueError`` code keeps working.
"""

from __future__ import annotations


class CrowdBudgetError(Exception):
    """Base class of every error crowdbudget raises on purpose."""


class InvalidParameterError(CrowdBudgetError, ValueError):
    """A parameter is outside its allowed range (the message names it and the range)."""


class UnknownPolicyError(CrowdBudgetError, KeyError):
    """A policy id is not registered (the message lists the registered ids)."""

    def __str__(self) -> str:  # KeyError would quote the message; keep it one plain line
        return str(self.args[0]) if self.args else ""


class DataFormatError(CrowdBudgetError, ValueError):
    """A data file or table is malformed (the message names the file, row or column)."""


class BudgetError(CrowdBudgetError, ValueError):
    """A budget is not positive, or an assignment would overspend it."""


class IneligibleAssignmentError(CrowdBudgetError, ValueError):
    """An assignment names an item or worker that cannot be labeled now."""
