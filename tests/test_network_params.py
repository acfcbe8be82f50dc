"""Policy parameters a network client may not set (issue: service safety)."""

import pytest

from crowdbudget.exceptions import InvalidParameterError, UnknownPolicyError
from crowdbudget.registry import check_network_policy, registered_policies


@pytest.mark.parametrize(
    "text",
    [
        "lagrangian-index:cache-dir=/tmp/anything",
        "lagrangian-index:grid-points=2048:label-cap=30",
        "gittins-inf:max-levels=100000",
        "kos:n-iter=100000",
        "random-bp:n-nodes=100000",
    ],
)
def test_server_only_parameters_are_refused_with_their_name(text: str) -> None:
    with pytest.raises(InvalidParameterError, match="server setting") as error:
        check_network_policy(text)
    name = text.split(":")[1].split("=")[0]
    assert repr(name) in str(error.value)


@pytest.mark.parametrize(
    "text", ["opt-kg", "lagrangian-index:arrival-rate=2", "requallo:fisher=0.3"]
)
def test_statistical_parameters_are_allowed(text: str) -> None:
    check_network_policy(text)


def test_unknown_ids_are_refused_as_usual() -> None:
    with pytest.raises(UnknownPolicyError):
        check_network_policy("no-such-policy")


def test_every_server_only_name_is_a_parameter() -> None:
    for spec in registered_policies().values():
        assert spec.server_only <= set(spec.params)
