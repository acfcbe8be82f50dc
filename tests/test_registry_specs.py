"""The registry's one grammar, parameter tables and capabilities (issue #16, DESIGN §11)."""

from __future__ import annotations

import json
import pickle
from contextlib import redirect_stdout
from io import StringIO

import numpy as np
import pytest

from crowdbudget.cli import main
from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError, UnknownPolicyError
from crowdbudget.registry import (
    POLICIES,
    Capabilities,
    ComponentSpec,
    Spec,
    make_policy,
    parse,
    parse_policy,
    register_policy,
    registered_policies,
    split_verdict,
)
from crowdbudget.types import Problem

#: every registered id, and the variants whose parameters change what they need
POLICY_TEXTS = [
    *sorted(registered_policies()),
    "opt-kg:per-context",
    "kg:posterior=one-coin",
    "opt-kg:posterior=one-coin",
    "opt-kg:posterior=two-coin",
    "opt-kg:features=logistic",
    "kg:features=logistic",
    "opt-kg:verdict=ds",
    "opt-kg:posterior=one-coin:verdict=ds",
    "uniform:verdict=one-coin-em",
]

_FEATURES = np.eye(4)[:, :2]
#: one problem of every kind a policy may refuse
PROBLEM_KINDS = {
    "binary": Problem(n_items=4, budget=8),
    "binary, workers": Problem(n_items=4, budget=8, n_workers=3),
    "3 classes": Problem(n_items=4, budget=8, n_classes=3),
    "3 classes, workers": Problem(n_items=4, budget=8, n_classes=3, n_workers=3),
    "binary, features": Problem(n_items=4, budget=8, features=_FEATURES),
    "binary, workers, features": Problem(n_items=4, budget=8, n_workers=3, features=_FEATURES),
    "binary, priced workers": Problem(
        n_items=4, budget=8, n_workers=3, worker_prices=np.array([1.0, 2.0, 1.0])
    ),
}


def test_one_grammar() -> None:
    assert parse("cvar-kg:alpha=0.3") == Spec("cvar-kg", (("alpha", "0.3"),), "cvar-kg:alpha=0.3")
    assert parse(" opt-kg:per-context:contexts=single ").id == "opt-kg:per-context"
    assert parse("ds:n-iter=50").raw == {"n-iter": "50"}
    with pytest.raises(InvalidParameterError, match="given twice"):
        parse("cvar-kg:alpha=0.3:alpha=0.4")
    with pytest.raises(InvalidParameterError, match="must look like key=value"):
        parse("cvar-kg:alpha=0.3:greedy")
    with pytest.raises(InvalidParameterError, match="empty id"):
        parse(":alpha=1")


def test_spec_resolves_aliases_checks_values_and_crosses_processes() -> None:
    spec = parse_policy("opt-kg:per-context:contexts=single")
    assert spec.id == "opt-kg-per-context" and str(spec) == "opt-kg:per-context:contexts=single"
    assert spec.values == {"contexts": "single"}
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert parse_policy(spec) is spec
    assert type(make_policy(spec)) is type(make_policy("opt-kg-per-context"))
    with pytest.raises(UnknownPolicyError, match="registered policies"):
        parse_policy("optkg")
    with pytest.raises(InvalidParameterError, match=r"alpha must be in \[0, 1\], got 1.5"):
        parse_policy("cvar-kg:alpha=1.5")
    with pytest.raises(InvalidParameterError, match="tie-break must be one of first, random"):
        parse_policy("kg:tie-break=last")
    with pytest.raises(
        InvalidParameterError, match=r"cannot read refit='x' \(an integer is needed\)"
    ):
        parse_policy("opt-kg:refit=x")


@pytest.mark.parametrize("text", POLICY_TEXTS)
def test_capabilities_are_the_built_policys_class_flags(text: str) -> None:
    """Declared once: the registry reads a policy's capabilities from its class."""
    spec = parse_policy(text)
    policy = make_policy(split_verdict(spec)[0])  # the verdict is built apart
    assert spec.capabilities == Capabilities.of(type(policy))


def test_a_policy_entry_declares_no_capabilities_of_its_own() -> None:
    from crowdbudget.policies.baselines import UniformPolicy

    with pytest.raises(InvalidParameterError, match="class flags"):
        register_policy(
            ComponentSpec("x-twice", UniformPolicy, "twice", capabilities=Capabilities())
        )
    assert "x-twice" not in registered_policies()


@pytest.mark.parametrize("text", POLICY_TEXTS)
@pytest.mark.parametrize("kind", sorted(PROBLEM_KINDS))
def test_check_refuses_exactly_the_problems_reset_refuses(text: str, kind: str) -> None:
    """``spec.check(problem)`` answers before anything is built what ``reset`` would say."""
    problem = PROBLEM_KINDS[kind]
    spec = parse_policy(text)
    reason = spec.refusal(problem)
    try:
        make_policy(split_verdict(spec)[0]).reset(problem, np.random.default_rng(0))
    except CrowdBudgetError as error:
        assert reason is not None, f"{text} on {kind}: reset refuses ({error}), check does not"
    else:
        assert reason is None, f"{text} on {kind}: check refuses ({reason}), reset does not"
    if reason is not None:
        assert "\n" not in reason and repr(text) in reason
        with pytest.raises(InvalidParameterError, match="^" + reason[:20]):
            spec.check(problem)


def test_refusal_lines_name_what_is_missing() -> None:
    needs_workers = Capabilities(needs_workers=True)
    assert "anonymous workers" in str(needs_workers.refusal(Problem(n_items=2, budget=2), "'x'"))
    refusal = parse_policy("opt-kg:features=logistic").refusal(PROBLEM_KINDS["binary"])
    assert refusal == (
        "'opt-kg:features=logistic' needs instance features; this problem has none "
        "(Problem.features)"
    )


def test_every_parameter_row_is_documented_and_settable_by_name() -> None:
    for entry in registered_policies().values():
        for name, row in entry.params.items():
            assert row.name == name and row.doc, f"{entry.policy_id}: {name} has no doc"
        assert entry.server_only == {n for n, r in entry.params.items() if not r.network_settable}


def test_policies_json_lists_tables_and_capabilities() -> None:
    out = StringIO()
    with redirect_stdout(out):
        assert main(["policies", "--json"]) == 0
    document = json.loads(out.getvalue())
    rows = {row["id"]: row for row in document["results"]}
    assert set(rows) == set(registered_policies())
    assert document["aliases"] == {"opt-kg:per-context": "opt-kg-per-context"}
    alpha = {p["name"]: p for p in rows["cvar-kg"]["parameters"]}["alpha"]
    assert alpha["default"] == 0.5 and alpha["range"] == [0.0, 1.0] and alpha["network_settable"]
    cache = {p["name"]: p for p in rows["lagrangian-index"]["parameters"]}["cache-dir"]
    assert cache["network_settable"] is False
    assert "chooses_workers" in rows["bbta"]["capabilities"]
    assert rows["opt-kg"]["capabilities_vary"] and rows["opt-kg"]["capabilities"] == []
    text = StringIO()
    with redirect_stdout(text):
        main(["policies"])
    assert "opt-kg:per-context = opt-kg-per-context" in text.getvalue()


def test_registry_imports_no_component() -> None:
    import ast
    from pathlib import Path

    import crowdbudget.registry as registry

    runtime_imports = set()
    for path in Path(registry.__file__).parent.glob("*.py"):  # the package's modules
        tree = ast.parse(path.read_text())
        runtime_imports |= {
            node.module
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("crowdbudget")
        }
    # the exceptions and the registry's own modules (and TYPE_CHECKING-only types)
    assert runtime_imports == {"crowdbudget.exceptions", "crowdbudget.registry.specs"}
    assert POLICIES.kind == "policy"


def test_aggregator_ids_follow_the_same_grammar() -> None:
    from crowdbudget.aggregation.registry import make_aggregator

    assert type(make_aggregator("ds:n-iter=5")).__name__ == "DawidSkene"
    with pytest.raises(InvalidParameterError, match="'n-iter' in 'ds:n-iter' must look like"):
        make_aggregator("ds:n-iter")
    with pytest.raises(InvalidParameterError, match="given twice"):
        make_aggregator("ds:n-iter=5:n-iter=6")


def test_policies_describes_one_id_from_its_table() -> None:
    out = StringIO()
    with redirect_stdout(out):
        assert main(["policies", "opt-kg:posterior=one-coin"]) == 0
    text = out.getvalue()
    assert "capabilities: needs_workers, chooses_workers" in text  # any number of classes
    assert "workers: str one of none, one-coin, two-coin, default none" in text
    out = StringIO()
    with redirect_stdout(out):
        assert main(["policies", "lagrangian-index", "--json"]) == 0
    (row,) = json.loads(out.getvalue())["results"]
    assert {p["name"] for p in row["parameters"] if not p["network_settable"]} == {
        "cache-dir",
        "grid-points",
        "label-cap",
        "max-lookahead",
    }
    assert main(["policies", "cvar-kg:alpha=3"]) == 2
