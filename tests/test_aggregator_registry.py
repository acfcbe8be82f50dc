"""Aggregators on the one component registry (issue #16, DESIGN §11): every registered id
conforms to its parameter table, the table drives validation and listings, and the first
build's API (make_aggregator, registered_aggregators, DEFAULT_VERDICT) keeps working."""

from __future__ import annotations

import json
import pickle

import pytest

from crowdbudget.aggregation import DEFAULT_VERDICT, make_aggregator, registered_aggregators
from crowdbudget.aggregation.registry import (
    AggregatorSpec,
    parse_aggregator,
    register_aggregator,
)
from crowdbudget.cli import main
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.registry import AGGREGATORS, POLICIES, ComponentSpec, Registry, Spec
from crowdbudget.testing.aggregator_checks import bad_values, check_aggregator_entry


@pytest.mark.parametrize("aggregator_id", list(registered_aggregators()))
def test_every_registered_aggregator_conforms_to_its_table(aggregator_id: str) -> None:
    check_aggregator_entry(aggregator_id)


def test_aggregators_live_on_the_generic_registry() -> None:
    assert isinstance(AGGREGATORS, Registry) and AGGREGATORS.kind == "aggregator"
    assert AGGREGATORS is not POLICIES
    entries = registered_aggregators()
    assert list(entries)[:4] == ["mv", "wmv", "ds", "one-coin-em"]
    assert all(
        isinstance(e, ComponentSpec) and isinstance(e, AggregatorSpec) for e in entries.values()
    )
    assert {k for k, v in entries.items() if v.binary_only} == {"kos", "kos-mean"}
    assert AGGREGATORS.aliases()["dawid-skene"] == "ds"
    assert DEFAULT_VERDICT in entries


def test_parameter_tables_say_type_range_default_and_doc() -> None:
    ds = AGGREGATORS.entry("ds").params
    assert (ds["n-iter"].type_name, ds["n-iter"].low, ds["n-iter"].default) == ("int", 1, 100)
    assert (ds["tol"].type_name, ds["tol"].low, ds["tol"].default) == ("float", 0, 1e-5)
    assert ds["seed"].argument == "rng" and ds["seed"].default == 0
    assert AGGREGATORS.entry("mmsr").params["n-iter"].default == 10_000  # the class's own
    assert AGGREGATORS.entry("kos").params["init"].choices == ("random", "ones")
    damping = AGGREGATORS.entry("bp").params["damping"]
    assert damping.range_text == "[0, 1)" and bad_values(damping) == ["not-a-value", "-1", "1"]
    for entry in registered_aggregators().values():
        assert all(row.doc for row in entry.params.values()), entry.component_id


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "ds:n-iter=0",
            "aggregator 'ds': n-iter=0 is out of range (n_iter must be an integer >= 1)",
        ),
        ("dawid-skene:tol=-1", "aggregator 'dawid-skene': tol=-1 is out of range"),
        ("bp:damping=1", "damping must be a number in [0, 1)"),
        ("bp:n-nodes=1", "n_nodes must be an integer in 2..4096"),
        ("mace:alpha=0", "alpha must be a number > 0"),
        ("bds:temperature=0", "temperature must be a number in (0, 1]"),
        ("bds:confusion-prior=1", "cannot read confusion-prior='1'"),
        ("kos:init=zeros", "init must be one of random, ones"),
        ("mv:seed=x", "aggregator 'mv': cannot read seed='x'"),
        ("wawa:tol=1", "aggregator 'wawa' has no parameter 'tol'; its parameters: seed, ties"),
        ("nope:n-iter=3", "unknown aggregator 'nope'; registered aggregators: mv, wmv, ds"),
    ],
)
def test_bad_values_are_refused_in_one_line_naming_the_id(text: str, needle: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        make_aggregator(text)
    message = str(info.value)
    assert needle in message and "\n" not in message


def test_good_values_build_what_they_say() -> None:
    bds = make_aggregator("bayesian-dawid-skene:temperature=auto:confusion-prior=4,1:seed=7")
    params = bds.get_params()
    assert (params["temperature"], params["confusion_prior"], params["rng"]) == (
        "auto",
        [4.0, 1.0],
        7,
    )
    assert make_aggregator("bayes:prior=2,1").get_params()["prior"] == [2.0, 1.0]
    assert make_aggregator("kos-mean:init=ones").get_params()["worker_messages"] == "mean"


def test_specs_are_parsed_once_and_cross_processes() -> None:
    spec = parse_aggregator("dawid-skene:n-iter=7")
    assert (spec.id, spec.kind, str(spec)) == ("ds", "aggregator", "dawid-skene:n-iter=7")
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and make_aggregator(again).get_params()["n_iter"] == 7
    assert spec.values == {"n-iter": 7}
    assert parse_aggregator("kos").capabilities.binary_only
    with pytest.raises(InvalidParameterError, match="'n-iter' in 'ds:n-iter' must look like"):
        parse_aggregator(Spec("ds:n-iter", (), "ds:n-iter"))


def test_register_refuses_a_taken_id() -> None:
    taken = AGGREGATORS.entry("mv")
    with pytest.raises(ValueError, match="aggregator id 'mv' is already registered"):
        register_aggregator(taken)


def test_verdict_refusal_reads_the_capability() -> None:
    from crowdbudget.policies.verdict import verdict_refusal

    assert verdict_refusal("kos", 3) == "verdict 'kos' takes two classes only; this problem has 3"
    assert verdict_refusal("ds", 3) is None


def test_aggregators_command_lists_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["aggregators", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = {row["id"]: row for row in document["results"]}
    assert set(rows) == set(registered_aggregators())
    assert document["default_verdict"] == DEFAULT_VERDICT
    n_iter = {p["name"]: p for p in rows["ds"]["parameters"]}["n-iter"]
    assert (n_iter["type"], n_iter["default"], n_iter["range"], n_iter["allowed"]) == (
        "int",
        100,
        [1, None],
        "an integer >= 1",
    )
    assert rows["kos"]["capabilities"] == ["binary_only"]
    assert main(["aggregators"]) == 0
    listing = capsys.readouterr().out
    assert listing.splitlines()[0].startswith("mv ") and "dawid-skene = ds" in listing
    assert main(["aggregators", "dawid-skene"]) == 0
    one = capsys.readouterr().out
    assert "n-iter: an integer >= 1, default 100 -- " in one
    assert main(["aggregators", "ds:n-iter=0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "crowdbudget aggregators: error: aggregator 'ds': n-iter=0 is out of range "
        "(n_iter must be an integer >= 1)"
    ]
