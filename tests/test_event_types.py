"""``LabelEvent`` and ``StepResult`` (one of each per label in a replay) keep the frozen
dataclass contract with their hand-written ``__init__``: the fields in order with their
defaults, immutability, equality and hash, ``replace``, pickling and copying."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest

from crowdbudget.types import LabelEvent, StepResult


@pytest.mark.parametrize("cls", [LabelEvent, StepResult])
def test_init_takes_every_field_in_order_with_its_default(cls: type) -> None:
    """A field added later must be added to ``__init__`` too (else it is never set)."""
    parameters = list(inspect.signature(cls).parameters.values())
    fields = dataclasses.fields(cls)
    assert [p.name for p in parameters] == [f.name for f in fields]
    for parameter, f in zip(parameters, fields, strict=True):
        if f.default is not dataclasses.MISSING:
            assert parameter.default == f.default, f.name
        elif f.default_factory is not dataclasses.MISSING:
            assert parameter.default is None, f.name  # None: a new value from the factory
        else:
            assert parameter.default is inspect.Parameter.empty, f.name
    assert cls.__slots__ == tuple(f.name for f in fields)


def _examples() -> list[Any]:
    event = LabelEvent(3, 1, 0, cost=2.5, time=7.0)
    return [
        event,
        LabelEvent(item=0, worker=2, label=1),
        StepResult(event, terminated=True, info={"why": "done"}),
        StepResult(None),
    ]


@pytest.mark.parametrize("value", _examples(), ids=repr)
def test_frozen_equal_hashable_picklable(value: Any) -> None:
    for f in dataclasses.fields(value):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, f.name, getattr(value, f.name))
    twin = type(value)(**{f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    assert twin == value and twin is not value
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.deepcopy(value) == value and copy.copy(value) == value
    assert dataclasses.replace(value) == value
    if isinstance(value, LabelEvent):
        assert hash(twin) == hash(value)
        assert dataclasses.replace(value, label=9) != value
        assert dataclasses.astuple(value) == (value.item, value.worker, value.label,
                                              value.cost, value.time)  # fmt: skip


def test_defaults() -> None:
    event = LabelEvent(1, 2, 0)
    assert (event.cost, event.time) == (1.0, None)
    first, second = StepResult(event), StepResult(event)
    assert (first.terminated, first.truncated, first.info) == (False, False, {})
    assert first.info is not second.info  # a new dict each, as the default factory gave
    assert StepResult(None) != StepResult(None, terminated=True)
