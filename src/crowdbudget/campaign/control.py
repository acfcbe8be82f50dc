"""The requester's own evidence in a live campaign: control tasks, blocking and gold.

**Control tasks.** Items whose answer the requester knows, given at creation
(``Campaign.create(..., control={"items": {...}, "first_k": 3, ...})``) or later
(:meth:`CampaignEvidence.add_control_items`). The live step serves them by the rule of
:mod:`crowdbudget.engine.control` (every worker's first ``first_k`` tasks, then a share
``rate``, or by their value: ``rule="value"``, which reads the campaign's money left),
through the same :class:`~crowdbudget.engine.control.ControlLedger` a simulated
campaign uses (``LiveStep.control``): the policy never chooses a control item, a control
assignment looks like any other to the worker, and its answer costs the worker's price like
any label. The verdict reads the control items' truth (``known_truth`` of an aggregator with
worker parameters; :func:`~crowdbudget.campaign.read_models.fit_verdict`), and accuracy on
gold is scored on the gold items that are not control items. In push mode a control task
goes to the team worker whose next task the rule says is one (fewest tasks served first;
:meth:`~crowdbudget.engine.live.LiveStep.control_for_team`) and the policy chooses the
other pairs with the control items closed to it.

**Blocking** (``block_below`` set): a worker whose posterior probability of an accuracy
below ``block_below`` reaches ``block_confidence`` after ``min_answers`` control answers
(:class:`~crowdbudget.engine.control.ControlLedger`; earlier labels on an item that becomes
a control item count as control answers) gets no more work: pull answers no assignment with
the cause ``blocked``, and in push mode the worker's pairs are closed, so the policy never
chooses them. The requester blocks and unblocks by hand (:meth:`CampaignEvidence.
block_worker`, :meth:`CampaignEvidence.unblock_worker`); a worker the requester unblocked is
not blocked by the rule again (the requester overrode it), until blocked by hand. The
verdict's treatment of blocked workers' labels is the requester's choice
(:meth:`CampaignEvidence.set_blocked_labels`): ``drop`` (default) fits the verdict without
them, ``keep`` lets the verdict's worker model weigh them. Both apply to an aggregator
verdict; the ``posterior`` verdict is the policy's own model, which saw every label.

Events (each applied by a handler here, replayed by ``Campaign.load`` and ``refresh``):

- ``created`` carries ``control`` when given at creation: ``{"rows": [[item, class], ...],
  "first_k", "rate", "block_below", "block_confidence", "min_answers", "prior", "rule",
  "horizon", "blocked_labels"}`` (indices; absent: no control tasks, the event as before);
- ``control_items_added``: ``{"rows": [[item, class], ...]}``;
- ``control_settings_changed``: the settings given (any of the above but ``rows`` and
  ``blocked_labels``); they apply to control answers from then on;
- ``worker_blocked``: ``{"worker", "by", "correct", "answered", "level", "p_below",
  "spent"}`` and, for a block on evidence other than control answers, ``"evidence"`` (a flat
  mapping of names to numbers or strings). ``by``: ``rule`` (the control rule), ``requester``
  (by hand), ``agreement`` (a platform's agreement test, e.g. the Label Studio sync's) or
  ``policy`` (the policy's own rule, e.g. Requallo's spammer test: ``evidence`` names the
  policy and its test). ``correct`` / ``answered`` are the worker's control answers then;
  ``level`` / ``p_below`` the control rule's (None without a level, or for a block not by
  the rule and without one). A block by hand or by a platform's test may carry the
  requester's ``"reason"`` (one line of free text, at most :data:`REASON_CHARS`
  characters; absent: none given). ``worker_unblocked``: ``{"worker"}``;
- ``blocked_labels_set``: ``{"blocked_labels": "drop" | "keep"}`` (it changes the verdict
  only, so it is not in the policy's random stream, like gold);
- ``gold_set``: ``{"rows": [[item, label], ...]}``, ``gold_removed``: ``{}`` (evaluation only).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from crowdbudget._validation import short_repr
from crowdbudget.campaign.config import check_gold
from crowdbudget.engine.control import (
    BLOCKED_LABELS,
    CONTROL_RULES,
    BlockEvidence,
    ControlLedger,
    ControlTasks,
    positive_information,
)
from crowdbudget.engine.live import policy_blocks
from crowdbudget.exceptions import DataFormatError, InvalidParameterError

if TYPE_CHECKING:
    from crowdbudget.campaign.config import CampaignConfig
    from crowdbudget.campaign.records import AssignmentRecord
    from crowdbudget.engine.live import LiveStep
    from crowdbudget.types import CampaignState

__all__ = [
    "BLOCKED_LABELS",
    "BLOCKERS",
    "CONTROL_SETTINGS",
    "REASON_CHARS",
    "CampaignControlLedger",
    "CampaignEvidence",
    "check_control",
    "check_control_settings",
]

#: the control rule's settings a requester gives (ControlTasks' fields of the same names)
CONTROL_SETTINGS = (
    "first_k",
    "rate",
    "block_below",
    "block_confidence",
    "min_answers",
    "prior",
    "rule",
    "horizon",
)
#: who may block a worker through :meth:`CampaignEvidence.block_worker` (the control rule
#: and the policy block through the campaign itself)
BLOCKERS = ("requester", "agreement")
#: the most entries a block's evidence may carry
_EVIDENCE_ENTRIES = 20
#: the longest reason a requester may give for a block (characters)
REASON_CHARS = 200

#: the settings of a campaign whose control tasks start without any (ControlTasks' defaults)
_DEFAULTS = ControlTasks(n_items=1)


def _number(value: Any, name: str) -> float:
    """``value`` as a finite float; refused: a bool, a string, anything not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InvalidParameterError(f"{name} must be a number, got {short_repr(value)}")
    if not math.isfinite(float(value)):
        raise InvalidParameterError(f"{name} must be a finite number, got {short_repr(value)}")
    return float(value)


def _integer(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InvalidParameterError(
            f"{name} must be an integer >= {minimum}, got {short_repr(value)}"
        )
    return int(value)


def settings_of(tasks: ControlTasks) -> dict[str, Any]:
    """The rule's settings as a JSON-ready dict (``prior`` a list)."""
    return {
        "first_k": tasks.first_k,
        "rate": tasks.rate,
        "block_below": tasks.block_below,
        "block_confidence": tasks.block_confidence,
        "min_answers": tasks.min_answers,
        "prior": list(tasks.prior),
        "rule": tasks.rule,
        "horizon": tasks.horizon,
    }


def tasks_of(settings: Mapping[str, Any]) -> ControlTasks:
    """The :class:`ControlTasks` rule of ``settings`` (checked there). A live campaign names
    its control items itself, so the subset-drawing fields are a placeholder (``n_items=1``;
    :meth:`ControlTasks.choose` is never called)."""
    values = {k: settings[k] for k in CONTROL_SETTINGS if k in settings}
    if "prior" in values:
        values["prior"] = tuple(values["prior"])
    return ControlTasks(n_items=1, **values)


def check_control_settings(
    changes: Mapping[str, Any], current: ControlTasks | None = None
) -> dict[str, Any]:
    """The settings in ``changes`` (names of :data:`CONTROL_SETTINGS`) checked — types here,
    ranges by :class:`ControlTasks` on the settings they give with ``current`` — as a
    JSON-ready dict of the given ones."""
    unknown = sorted(set(changes) - set(CONTROL_SETTINGS))
    if unknown:
        raise InvalidParameterError(
            f"unknown control setting {short_repr(unknown[0])}; settings: "
            + ", ".join(CONTROL_SETTINGS)
        )
    out: dict[str, Any] = {}
    for name, value in changes.items():
        if name in ("first_k", "min_answers", "horizon"):
            out[name] = _integer(value, name, 0 if name == "first_k" else 1)
        elif name == "rule":
            if value not in CONTROL_RULES:
                raise InvalidParameterError(
                    f"control rule must be one of {', '.join(CONTROL_RULES)}, "
                    f"got {short_repr(value)}"
                )
            out[name] = str(value)
        elif name == "prior":
            if isinstance(value, str | bytes) or not isinstance(value, Sequence) or len(value) != 2:
                raise InvalidParameterError(
                    f"prior must be two numbers > 0 (alpha, beta), got {short_repr(value)}"
                )
            out[name] = [_number(v, "prior") for v in value]
        elif name == "block_below" and value is None:
            out[name] = None
        else:
            out[name] = _number(value, name)
    tasks_of({**settings_of(current or _DEFAULTS), **out})  # the ranges (one error line)
    return out


def check_block_evidence(evidence: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A block's evidence: a flat mapping of names (strings) to finite numbers, strings or
    None, at most :data:`_EVIDENCE_ENTRIES` entries (stored in the event as given)."""
    if evidence is None:
        return None
    if not isinstance(evidence, Mapping) or len(evidence) > _EVIDENCE_ENTRIES:
        raise InvalidParameterError(
            f"evidence must be a mapping of at most {_EVIDENCE_ENTRIES} names to numbers or "
            f"strings, got {short_repr(evidence)}"
        )
    out: dict[str, Any] = {}
    for name, value in evidence.items():
        if not isinstance(name, str):
            raise InvalidParameterError(f"evidence names must be strings, got {short_repr(name)}")
        if value is None or isinstance(value, str | bool):
            out[name] = value
        else:
            number = _number(value, f"evidence {name!r}")
            out[name] = int(number) if isinstance(value, int | np.integer) else number
    return out


def check_block_reason(reason: Any) -> str | None:
    """The requester's reason for a block: None (none given) or one line of text, 1 to
    :data:`REASON_CHARS` characters after stripping the ends' whitespace, without control
    characters (it is shown in the status and the dashboard as given)."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise InvalidParameterError(f"reason must be a string, got {short_repr(reason)}")
    text = reason.strip()
    if not text or len(text) > REASON_CHARS:
        raise InvalidParameterError(
            f"reason must be 1 to {REASON_CHARS} characters, got {len(text)}"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidParameterError("reason must be one line without control characters")
    return text


def check_blocked_labels(mode: Any) -> str:
    if mode not in BLOCKED_LABELS:
        raise InvalidParameterError(
            f"blocked_labels must be 'drop' or 'keep', got {short_repr(mode)}"
        )
    return str(mode)


def check_control_rows(
    rows: Mapping[str, str] | Iterable[Sequence[str]],
    item_index: Mapping[str, int],
    class_index: Mapping[str, int],
    classes: Sequence[str],
    known: Mapping[int, int],
) -> dict[int, int]:
    """Control items, ``{item id: class}`` or ``(item id, class)`` pairs, as ``{item index:
    class index}`` — refused as gold is (no rows, more rows than items, an unknown item or
    class, an item twice: :func:`~crowdbudget.campaign.config.check_gold`) and when an item
    is a control item already with another class (a known answer does not change)."""
    codes = check_gold(rows, item_index, class_index, classes, what="control")
    item_ids = {index: item_id for item_id, index in item_index.items()}
    for item, code in codes.items():
        if known.get(item, code) != code:
            raise DataFormatError(
                f"item {short_repr(item_ids[item])} is a control item with the answer "
                f"{short_repr(classes[known[item]])} already"
            )
    return codes


def check_control(
    control: Mapping[str, Any] | None, items: Sequence[str], classes: Sequence[str]
) -> dict[str, Any] | None:
    """The ``control`` payload of a ``created`` event from :meth:`Campaign.create`'s
    ``control`` (``{"items": {item id: class}, "first_k": …, "blocked_labels": …}``, every
    key optional) for a campaign of ``items`` and ``classes`` (checked ids), checked; None
    when not given."""
    if control is None:
        return None
    if not isinstance(control, Mapping):
        raise InvalidParameterError(
            f"control must be a mapping (items, settings), got {short_repr(control)}"
        )
    settings = {k: v for k, v in control.items() if k not in ("items", "blocked_labels")}
    payload: dict[str, Any] = {**settings_of(_DEFAULTS), **check_control_settings(settings)}
    rows = control.get("items")
    codes: dict[int, int] = {}
    if rows is not None:
        item_index = {item: k for k, item in enumerate(items)}
        class_index = {c: k for k, c in enumerate(classes)}
        codes = check_control_rows(rows, item_index, class_index, classes, {})
    payload["rows"] = [[i, codes[i]] for i in sorted(codes)]
    payload["blocked_labels"] = check_blocked_labels(control.get("blocked_labels", "drop"))
    return payload


@dataclass
class CampaignControlLedger(ControlLedger):
    """A live campaign's :class:`ControlLedger`: the same rule and evidence, control items
    that grow (:meth:`set_truth`), and the workers the requester unblocked (``exempt``: the
    rule blocks them no more), and the campaign's money left for the value rule
    (``money_left``: budget − spent − committed, the campaign's exact ledger)."""

    exempt: set[int] = field(default_factory=set)
    money_left: Callable[[], float] | None = None

    # the value rule's per-worker label value E[w(a)] by (correct, answered, prior), and the
    # sum over the unblocked workers per ledger state: v̄ in O(1) per worker (below)
    _values: dict[tuple[int, int, tuple[float, float]], float] = field(
        default_factory=dict, repr=False, compare=False
    )
    _value_sum: tuple[Any, float, int] | None = field(default=None, repr=False, compare=False)

    def _value_of(self, worker: int) -> float:
        """``E[w(a)]`` under ``worker``'s posterior (memoised on their answer counts)."""
        c, n = self.correct.get(worker, 0), self.answered.get(worker, 0)
        key = (c, n, self.tasks.prior)
        value = self._values.get(key)
        if value is None:
            alpha, beta = self.tasks.prior
            value = self._values[key] = float(positive_information(alpha + c, beta + n - c))
        return value

    def _replacement(self, worker: int | None) -> float:
        """:meth:`ControlLedger._replacement` (a live ledger's ``n_workers`` is None: the
        mean over the other unblocked workers with control answers), from one sum per ledger
        state minus the worker's own: O(1) per worker instead of O(workers), so a push
        team's value rule costs O(team) per question, not O(team²)."""
        if self.n_workers is not None:
            return super()._replacement(worker)
        version = (self.control_labels, frozenset(self.blocked), self.tasks.prior)
        if self._value_sum is None or self._value_sum[0] != version:
            mine = [w for w in self.answered if w not in self.blocked]
            self._value_sum = (version, float(sum(self._value_of(w) for w in mine)), len(mine))
        _, total, count = self._value_sum
        if worker is not None and worker in self.answered and worker not in self.blocked:
            total, count = total - self._value_of(worker), count - 1
        if count <= 0:
            return float(positive_information(*self.tasks.prior))
        return total / count

    def _labels_left(self) -> float:
        """The value rule's labels left: the campaign's money left (pending assignments
        paid for already: committed) at the campaign's default price (imported labels cost
        nothing, so the mean price so far would undercount)."""
        if self.money_left is None:
            return super()._labels_left()
        return max(0.0, self.money_left() / max(self.price, 1e-12))

    def answer(self, worker: int, item: int, label: int, spent: float) -> None:
        """:meth:`ControlLedger.answer`, with no block for an exempt worker."""
        blocked_before = worker in self.blocked
        super().answer(worker, item, label, spent)
        if not blocked_before and worker in self.exempt:
            self.blocked.pop(worker, None)

    def set_truth(self, truth: Mapping[int, int]) -> None:
        """The control items and their classes, ``{item index: class index}``."""
        self.items = np.array(sorted(truth), dtype=np.int64)
        self.truth = np.full(int(self.items.max(initial=-1)) + 1, -1, dtype=np.int64)
        self.truth[self.items] = [truth[int(i)] for i in self.items]
        self.item_set = {int(i) for i in self.items}

    def evidence(self, worker: int, spent: float) -> BlockEvidence:
        """``worker``'s control answers now, with ``P(accuracy < block_below)`` under the
        rule's Beta posterior (as :meth:`ControlLedger.answer` computes it; NaN level and
        probability without a level)."""
        c, n = self.correct.get(worker, 0), self.answered.get(worker, 0)
        level = self.tasks.block_below
        if level is None:
            return BlockEvidence(c, n, math.nan, math.nan, spent)
        from scipy import stats  # here, not at import: scipy.stats costs 0.6 s to import

        alpha, beta = self.tasks.prior
        return BlockEvidence(
            c, n, level, float(stats.beta.cdf(level, alpha + c, beta + n - c)), spent
        )


def _none_for_nan(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


class CampaignEvidence:
    """Gold, control tasks and blocking as :class:`~crowdbudget.campaign.Campaign` methods
    (module docstring). The attributes below are the campaign's."""

    config: CampaignConfig
    item_ids: list[str]
    worker_ids: list[str]
    state: CampaignState
    _item_index: dict[str, int]
    _worker_index: dict[str, int]
    _class_index: dict[str, int]
    _live: LiveStep
    policy: Any  # the campaign's policy (read for its own blocks: policy_blocks)
    _records: dict[str, AssignmentRecord]
    _push: bool
    _gold: dict[int, int]
    _no_work: dict[int | None, str]

    def _commit(self, kind: str, payload: dict[str, Any]) -> None:
        raise NotImplementedError  # the campaign's

    def _spent(self) -> float:
        raise NotImplementedError  # the campaign's

    def _money_left(self) -> float:
        raise NotImplementedError  # the campaign's

    # ------------------------------------------------------------------ gold (evaluation)
    def set_gold(self, gold: Mapping[str, str] | Iterable[Sequence[str]]) -> int:
        """Store the requester's gold labels for a sample of the items (replacing any earlier
        gold): ``{item id: class}`` or ``(item id, class)`` pairs. Returns how many.

        Gold only measures the verdict (:meth:`calibration`); the policy and the verdict
        never read it, so it changes no allocation and no result. Refused (nothing stored):
        no rows, more rows than the campaign has items, an unknown item or class, an item
        given twice. The same gold again stores nothing."""
        codes = check_gold(gold, self._item_index, self._class_index, self.config.classes)
        if codes == self._gold:
            return len(codes)  # a retry of the same upload
        self._commit("gold_set", {"rows": [[i, codes[i]] for i in sorted(codes)]})
        return len(codes)

    def remove_gold(self) -> bool:
        """Remove the gold labels; returns whether there were any (none: nothing stored)."""
        if not self._gold:
            return False
        self._commit("gold_removed", {})
        return True

    def gold(self) -> dict[str, str]:
        """The gold labels, ``{item id: class}`` in item order (empty: no gold)."""
        classes = self.config.classes
        return {self.item_ids[i]: classes[self._gold[i]] for i in sorted(self._gold)}

    @property
    def gold_classes(self) -> Mapping[int, int]:
        """The gold class of each gold item, ``{item index: class index}`` (evaluation only:
        :meth:`set_gold`)."""
        return self._gold

    def _on_gold_set(self, p: dict[str, Any]) -> None:
        self._gold = {int(item): int(label) for item, label in p["rows"]}

    def _on_gold_removed(self, p: dict[str, Any]) -> None:
        self._gold = {}

    # ------------------------------------------------------------------ control tasks
    @property
    def control_ledger(self) -> CampaignControlLedger | None:
        """The control tasks' ledger (rule, served tasks, control answers, blocks), None
        while the campaign has no control tasks."""
        ledger = self._live.control
        return ledger if isinstance(ledger, CampaignControlLedger) else None

    @property
    def control_truth(self) -> Mapping[int, int]:
        """The control items' classes, ``{item index: class index}`` (empty: none)."""
        return self._control_truth

    @property
    def blocked_labels(self) -> str:
        """The verdict's treatment of blocked workers' labels: ``drop`` or ``keep``."""
        return self._blocked_labels

    def control_items(self) -> dict[str, str]:
        """The control items and their answers, ``{item id: class}`` in item order."""
        classes = self.config.classes
        truth = self._control_truth
        return {self.item_ids[i]: classes[truth[i]] for i in sorted(truth)}

    def add_control_items(self, items: Mapping[str, str] | Iterable[Sequence[str]]) -> int:
        """Make items control items with their known answers (``{item id: class}`` or
        pairs); returns how many are new. Refused (nothing stored): no rows, more rows than
        items, an unknown item or class, an item twice, a control item given another answer.
        Items that are control items already with the same answer store nothing."""
        codes = check_control_rows(
            items, self._item_index, self._class_index, self.config.classes, self._control_truth
        )
        new = {i: c for i, c in codes.items() if i not in self._control_truth}
        if new:
            self._commit("control_items_added", {"rows": [[i, new[i]] for i in sorted(new)]})
            self._record_blocks()
        return len(new)

    def update_control(self, **settings: Any) -> None:
        """Change the control rule (``first_k``, ``rate``, ``rule``: ``fixed`` or
        ``value``, ``horizon``: the value rule's look-ahead) or the blocking settings
        (``block_below``: None stops blocking by the rule, ``block_confidence``,
        ``min_answers``, ``prior``); they apply to tasks and control answers from now on.
        A campaign without control tasks starts them (no control item yet)."""
        ledger = self.control_ledger
        changes = check_control_settings(settings, None if ledger is None else ledger.tasks)
        if changes:
            self._commit("control_settings_changed", changes)

    def check_control_update(
        self, settings: Mapping[str, Any], blocked_labels: str | None = None
    ) -> None:
        """Refuse what :meth:`update_control` (``settings``) or :meth:`set_blocked_labels`
        would refuse, storing nothing: a request changing both checks both first."""
        ledger = self.control_ledger
        check_control_settings(settings, None if ledger is None else ledger.tasks)
        if blocked_labels is not None:
            check_blocked_labels(blocked_labels)

    def set_blocked_labels(self, mode: str) -> None:
        """``drop``: the verdict is fitted without blocked workers' labels; ``keep``: with
        them (its worker model weighs them). Changes no allocation. The same again stores
        nothing."""
        mode = check_blocked_labels(mode)
        if mode != self._blocked_labels:
            self._commit("blocked_labels_set", {"blocked_labels": mode})

    def block_worker(
        self,
        worker_id: str,
        *,
        by: str = "requester",
        evidence: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> bool:
        """Block a worker by hand (``by="requester"``) or on a test of the requester's tools
        (``by="agreement"``: a platform's agreement test, its numbers in ``evidence``, a flat
        mapping of names to numbers or strings); their control answers are recorded as the
        evidence too, and ``reason`` (one line, at most :data:`REASON_CHARS` characters:
        :func:`check_block_reason`) as the requester's note. Returns whether they were not
        blocked already (blocked: nothing stored, the reason neither). Everything is checked
        before anything is stored."""
        worker = self._known_worker(worker_id)
        if by not in BLOCKERS:
            raise InvalidParameterError(
                f"by must be one of {', '.join(BLOCKERS)}, got {short_repr(by)}"
            )
        detail = check_block_evidence(evidence)
        note = check_block_reason(reason)
        ledger = self.control_ledger
        if ledger is not None and worker in ledger.blocked:
            return False
        payload = self._block_payload(worker, by, detail)
        self._commit("worker_blocked", payload | ({} if note is None else {"reason": note}))
        return True

    def unblock_worker(self, worker_id: str) -> bool:
        """Lift a worker's block (the rule blocks them no more); returns whether they were
        blocked (not blocked: nothing stored)."""
        worker = self._known_worker(worker_id)
        ledger = self.control_ledger
        if ledger is None or worker not in ledger.blocked:
            return False
        self._commit("worker_unblocked", {"worker": worker_id})
        return True

    def is_control_item(self, item_id: str) -> bool:
        item = self._item_index.get(item_id)
        return item is not None and item in self._control_truth

    def is_blocked(self, worker_id: str) -> bool:
        ledger = self.control_ledger
        worker = self._worker_index.get(worker_id)
        return ledger is not None and worker is not None and worker in ledger.blocked

    def blocked_workers(self) -> list[dict[str, Any]]:
        """The blocked workers in joining order, each with its evidence: ``worker``, ``by``
        (``rule``, ``requester``, ``agreement`` or ``policy``), ``correct`` of ``answered``
        control answers, ``level``, ``p_below`` (P(accuracy < level); None without a level),
        ``spent`` (the campaign's spend when it happened), for a block on other
        evidence (agreement, the policy's test), ``evidence``, and the requester's
        ``reason`` when one was given."""
        ledger = self.control_ledger
        if ledger is None:
            return []
        out = []
        for worker in sorted(ledger.blocked):
            evidence = ledger.blocked[worker]
            out.append(
                {
                    "worker": self.worker_ids[worker],
                    "by": self._blocked_by.get(worker, "rule"),
                    "correct": evidence.correct,
                    "answered": evidence.answered,
                    "level": _none_for_nan(evidence.level),
                    "p_below": _none_for_nan(evidence.p_below),
                    "spent": evidence.at_spent,
                    **(
                        {"evidence": self._block_evidence[worker]}
                        if worker in self._block_evidence
                        else {}
                    ),
                    **(
                        {"reason": self._block_reason[worker]}
                        if worker in self._block_reason
                        else {}
                    ),
                }
            )
        return out

    def control_status(self) -> dict[str, Any] | None:
        """The control tasks in the status (None: none): the rule's settings,
        ``blocked_labels``, ``n_items``, ``answers`` (control answers received) and ``spent``
        (on labels of control items)."""
        ledger = self.control_ledger
        if ledger is None:
            return None
        log = self.state.label_log
        on_control = np.isin(log.items, ledger.items)
        return {
            **settings_of(ledger.tasks),
            "blocked_labels": self._blocked_labels,
            "n_items": len(self._control_truth),
            "answers": ledger.control_labels,
            "spent": float(log.costs[on_control].sum()),
        }

    def no_work_reason(self, worker_id: str) -> str | None:
        """Why the worker's last request got no work, while nothing changed since
        (``blocked``, ``budget``, ``capacity``, ``done``, ``policy``, ``declined``), or None."""
        worker = self._worker_index.get(worker_id)
        return None if worker is None else self._no_work.get(worker)

    # ------------------------------------------------------------------ helpers
    def _known_worker(self, worker_id: str) -> int:
        worker = self._worker_index.get(str(worker_id)) if isinstance(worker_id, str) else None
        if worker is None:
            raise DataFormatError(
                f"no worker {short_repr(worker_id)} in this campaign (a worker joins by asking "
                "for work or by being registered)"
            )
        return worker

    def _block_payload(
        self, worker: int, by: str, evidence_of: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        spent = self._spent()
        ledger = self.control_ledger
        evidence = (
            ledger.blocked.get(worker) or ledger.evidence(worker, spent)
            if ledger is not None
            else BlockEvidence(0, 0, math.nan, math.nan, spent)
        )
        return {
            "worker": self.worker_ids[worker],
            "by": by,
            "correct": evidence.correct,
            "answered": evidence.answered,
            "level": _none_for_nan(evidence.level),
            "p_below": _none_for_nan(evidence.p_below),
            "spent": evidence.at_spent,
            **({} if evidence_of is None else {"evidence": dict(evidence_of)}),
        }

    def _record_blocks(self) -> None:
        """Store a ``worker_blocked`` event for each block the rule made (on a label, an
        import or new control items) that has none yet, then for each worker the policy
        blocked by its own rule (:func:`~crowdbudget.engine.live.policy_blocks`, e.g.
        Requallo's spammer test) who is not blocked yet and whom the requester did not
        unblock — ``by: policy`` with the policy's evidence."""
        ledger = self.control_ledger
        if ledger is not None:
            for worker in sorted(set(ledger.blocked) - set(self._blocked_by)):
                self._commit("worker_blocked", self._block_payload(worker, "rule"))
        blocks = policy_blocks(self.policy)
        for worker in sorted(blocks):
            ledger = self.control_ledger
            if ledger is not None and (worker in ledger.blocked or worker in ledger.exempt):
                continue
            if 0 <= worker < len(self.worker_ids):
                self._commit(
                    "worker_blocked", self._block_payload(worker, "policy", blocks[worker])
                )

    def _ensure_ledger(self) -> CampaignControlLedger:
        """The ledger, started on the campaign's history when control tasks begin: tasks
        handed out so far count as served (so a worker past ``first_k`` gets the rate)."""
        ledger = self.control_ledger
        if ledger is None:
            empty = np.zeros(0, dtype=np.int64)
            config = self.config
            ledger = CampaignControlLedger(
                _DEFAULTS,
                empty,
                empty,
                budget=float(config.budget),
                price=float(config.default_price),
                money_left=self._money_left,
            )
            for record in self._records.values():
                ledger.served[record.worker] = ledger.served.get(record.worker, 0) + 1
            ledger.handed_total = len(self._records)
            self._live.control = ledger
        return ledger

    def _start_control(self) -> None:
        """From the ``created`` event: the control state, and the control tasks given then."""
        self._control_truth: dict[int, int] = {}
        self._blocked_labels = "drop"
        self._blocked_by: dict[int, str] = {}  # worker -> who blocked them (an event each)
        # worker -> the evidence of a block not on control answers (agreement, policy)
        self._block_evidence: dict[int, dict[str, Any]] = {}
        self._block_reason: dict[int, str] = {}  # worker -> the requester's reason
        control = self.config.control
        if control is not None:
            self._blocked_labels = control.get("blocked_labels", "drop")
            ledger = self._ensure_ledger()
            ledger.tasks = tasks_of(control)
            self._on_control_items_added({"rows": control.get("rows", [])})

    def _close_pairs(self, worker: int, closed: bool) -> None:
        """Push mode: close (or open again) a worker's pairs, so the policy never chooses a
        blocked worker (an unblocked one gets the pairs of items not theirs already)."""
        pairs = self.state.pairs
        if pairs is None or not self._push:
            return
        mine = pairs.workers == worker
        if closed:
            pairs.remaining[mine] = 0
        else:
            own = self._live.worker_items.get(worker, set())
            taken = np.isin(pairs.items, np.fromiter(own, dtype=np.int64, count=len(own)))
            pairs.remaining[mine & ~taken] = 1

    def _blocked_index(self, worker: int) -> bool:
        """Whether the worker of index ``worker`` is blocked."""
        ledger = self._live.control
        return ledger is not None and worker in ledger.blocked

    # ------------------------------------------------------------------ event handlers
    def _on_control_items_added(self, p: dict[str, Any]) -> None:
        new = {int(i): int(c) for i, c in p["rows"] if int(i) not in self._control_truth}
        self._control_truth.update(new)
        ledger = self._ensure_ledger()
        ledger.set_truth(self._control_truth)
        # the labels these items had already are control answers too, in arrival order
        log = self.state.label_log
        spent = self._spent()
        for item, worker, label in zip(log.items, log.workers, log.labels, strict=True):
            if int(item) in new and worker >= 0:
                ledger.answer(int(worker), int(item), int(label), spent)

    def _on_control_settings_changed(self, p: dict[str, Any]) -> None:
        ledger = self._ensure_ledger()
        ledger.tasks = tasks_of({**settings_of(ledger.tasks), **p})

    def _on_worker_blocked(self, p: dict[str, Any]) -> None:
        worker = self._worker_index[p["worker"]]
        ledger = self._ensure_ledger()
        if worker not in ledger.blocked:
            level = math.nan if p["level"] is None else float(p["level"])
            p_below = math.nan if p["p_below"] is None else float(p["p_below"])
            ledger.blocked[worker] = BlockEvidence(
                int(p["correct"]), int(p["answered"]), level, p_below, float(p["spent"])
            )
        ledger.exempt.discard(worker)
        self._blocked_by[worker] = p["by"]
        if p.get("evidence") is not None:
            self._block_evidence[worker] = dict(p["evidence"])
        if p.get("reason") is not None:
            self._block_reason[worker] = str(p["reason"])
        self._close_pairs(worker, True)

    def _on_worker_unblocked(self, p: dict[str, Any]) -> None:
        worker = self._worker_index[p["worker"]]
        ledger = self._ensure_ledger()
        ledger.blocked.pop(worker, None)
        ledger.exempt.add(worker)
        self._blocked_by.pop(worker, None)
        self._block_evidence.pop(worker, None)
        self._block_reason.pop(worker, None)
        self._close_pairs(worker, False)

    def _on_blocked_labels_set(self, p: dict[str, Any]) -> None:
        self._blocked_labels = p["blocked_labels"]
