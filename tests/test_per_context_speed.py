"""OptKG per context with the pairs laid out by context (a context is a slice) decides exactly
as the previous layout, kept here as :class:`Reference` (a masked argmax over the context's
pair indices): same pairs, same labels, same accuracies, bit-identical scores. The fused,
compiled d = 0.5 score (item half of the moment-matched update, our own incomplete beta at 1/2)
agrees with ``one_coin_update`` + ``error_probability`` through SciPy within the kernel's
accuracy (1e-12 relative), checked on the pairs' scores at the end of every campaign."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.datasets import load_dataset
from crowdbudget.policies._index import csr_groups
from crowdbudget.policies.bandits.per_context import PerContextOptKG, _half_after, _half_error
from crowdbudget.posteriors.one_coin import one_coin_update
from crowdbudget.registry import make_policy
from crowdbudget.simulation.contextual import WORKER_MODELS, ContextualWorkerEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import CampaignState
from decision_log import run_recorded


class Reference(PerContextOptKG):
    """The implementation before issue 21's speed-up (pair order, reference scores)."""

    def _build(self, state: CampaignState) -> None:
        n, k = state.problem.n_items, self.n_workers_
        if state.pairs is None:
            self._items = np.repeat(np.arange(n, dtype=np.int64), k)
            self._workers = np.tile(np.arange(k, dtype=np.int64), n)
            self._remaining = None
        else:
            self._items = state.pairs.items
            self._workers = state.pairs.workers
            self._remaining = state.pairs.remaining
        self._virtual = self.contexts_[self._items] * k + self._workers
        self._ctx_ptr, self._ctx_order = csr_groups(self.contexts_[self._items], self.n_contexts_)
        self._item_ptr, self._item_order = csr_groups(self._items, n)
        self._virt_ptr, self._virt_order = csr_groups(self._virtual, self.n_contexts_ * k)
        self._scores = self._score(np.arange(self._items.shape[0]))
        self._built = True

    def _best_in_context(self, allowed, s, worker):  # type: ignore[no-untyped-def]
        pairs = self._ctx_order[self._ctx_ptr[s] : self._ctx_ptr[s + 1]]
        if worker is not None:
            pairs = pairs[self._workers[pairs] == worker]
        ok = allowed[self._items[pairs]]
        if self._remaining is not None:
            ok &= self._remaining[pairs] > 0
        if not np.any(ok):
            return None
        best = int(pairs[int(np.argmax(np.where(ok, self._scores[pairs], -np.inf)))])
        return int(self._items[best]), int(self._workers[best])


def _run(policy_id: str, env: object, budgets: list[float], seed: int, mode: str, ref: bool):
    policy = make_policy(policy_id)
    assert isinstance(policy, PerContextOptKG)
    # the reference takes the smallest pair index among equal scores (the rule before issue
    # 15's random default): compare the layouts and scores under that rule
    policy.tie_break = "first"
    if ref:
        policy.__class__ = Reference
    return (*run_recorded(policy, env, budgets, seed, mode), policy)


def _check(policy_id: str, env: object, budgets: list[float], seed: int, mode: str) -> None:
    fast_log, fast_acc, fast = _run(policy_id, env, budgets, seed, mode, False)
    ref_log, ref_acc, ref = _run(policy_id, env, budgets, seed, mode, True)
    assert fast_log == ref_log
    assert fast_acc == ref_acc
    assert type(ref) is Reference and type(fast) is PerContextOptKG
    # the fast path holds the pairs by context: position p is pair _perm[p]
    perm = np.arange(ref._scores.shape[0]) if fast._perm is None else fast._perm
    np.testing.assert_array_equal(fast._scores.view(np.int64), ref._scores[perm].view(np.int64))
    np.testing.assert_array_equal(fast._items, ref._items[perm])
    np.testing.assert_array_equal(fast._workers, ref._workers[perm])
    if fast._half:  # the compiled score against the update and error through SciPy
        every = np.arange(fast._items.shape[0])
        # the rescoring after each label (one compiled pass over the item's and the worker's
        # pairs) kept every score and error as scoring the final state afresh gives them
        np.testing.assert_array_equal(
            fast._scores.view(np.int64), fast._score(every).view(np.int64)
        )
        post = fast.posterior_
        np.testing.assert_array_equal(
            fast._now.view(np.int64), _half_error(post.a, post.b).view(np.int64)
        )
        np.testing.assert_allclose(
            fast._score(every), fast._score_reference(every), rtol=1e-11, atol=1e-14
        )


def test_half_after_matches_the_update_and_scipy() -> None:
    """The fused item-half update gives one_coin_update + error_probability (SciPy's betainc)
    within 1e-12 relative, and works elementwise (a subset gives the bits of the whole)."""
    rng = np.random.default_rng(7)
    m = 200_000
    a, b, c, d = (np.exp(rng.uniform(-5.0, 8.0, m)) for _ in range(4))
    b[: m // 4] = a[: m // 4]  # exact ties (error 1/2)
    b[m // 4 : m // 2] = a[m // 4 : m // 2] * (1.0 + rng.normal(0.0, 1e-12, m // 4))
    d[m // 2 : m // 2 + 1000] = c[m // 2 : m // 2 + 1000]
    a1, b1, _, _, _ = one_coin_update(a, b, c, d, 1)
    a0, b0, _, _, _ = one_coin_update(a, b, c, d, 0)
    expected = np.minimum(_half_error(a1, b1), _half_error(a0, b0))
    got = _half_after(a, b, c, d)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(
        _half_after(a[7:50], b[7:50], c[7:50], d[7:50]).view(np.int64),
        got[7:50].view(np.int64),
    )


CONTEXT_IDS = ["opt-kg-per-context", "opt-kg-per-context:contexts=single"]


@pytest.mark.parametrize("dataset", ["ionosphere", "pima"])
@pytest.mark.parametrize("workers", WORKER_MODELS)
@pytest.mark.parametrize("policy_id", CONTEXT_IDS)
def test_uci_worlds_same_decisions(dataset: str, workers: str, policy_id: str) -> None:
    env = ContextualWorkerEnvironment.from_uci(dataset, workers)
    n = env.n_items
    seeds = (0, 5) if dataset == "ionosphere" else (1,)
    for seed in seeds:
        _check(policy_id, env, [2.0 * n, 4.0 * n], seed, "push")


@pytest.mark.parametrize("policy_id", CONTEXT_IDS)
def test_uci_pull_same_decisions(policy_id: str) -> None:
    env = ContextualWorkerEnvironment.from_uci("ionosphere", "spammer-hammer")
    for seed in (0, 2):
        _check(policy_id, env, [3.0 * env.n_items], seed, "pull")


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_replay_same_decisions(mode: str) -> None:
    """A replay: only pairs with an unused recorded label are candidates (``remaining``)."""
    rte = ReplayEnvironment.from_label_data(load_dataset("rte"))
    for seed in (0, 3):
        _check("opt-kg-per-context:contexts=single", rte, [400.0, 900.0], seed, mode)


def test_masked_best_is_numpys_masked_argmax() -> None:
    """The compiled best pair of a context slice: ``np.argmax`` of the scores with −∞ where
    the item is not allowed or the pair's label is used up (through ``perm``), the number of
    pairs tied with it, and the n-th of them (the random tie draw's pick)."""
    from crowdbudget.policies.bandits.per_context import _EMPTY, _masked_best, _nth_tied

    rng = np.random.default_rng(11)
    for trial in range(300):
        size = int(rng.integers(1, 80))
        scores = rng.integers(-3, 3, size).astype(float) / 4.0  # many equal scores
        if trial % 5 == 0:
            scores[rng.integers(size)] = -np.inf
        items = rng.integers(0, 30, size).astype(np.int64)
        allowed = rng.random(30) < (0.0 if trial % 13 == 0 else 0.7)
        remaining = rng.integers(0, 2, size + 5).astype(np.int64)
        perm = rng.permutation(size + 5)[:size].astype(np.int64)
        lo, hi = int(rng.integers(0, size)), size
        for rem, per in ((_EMPTY, _EMPTY), (remaining, _EMPTY), (remaining, perm)):
            ok = allowed[items[lo:hi]]
            if rem.shape[0]:
                index = np.arange(lo, hi) if not per.shape[0] else per[lo:hi]
                ok = ok & (rem[index] > 0)
            masked = np.where(ok, scores[lo:hi], -np.inf)
            at, n_tied, best = _masked_best(scores, items, allowed, rem, per, lo, hi)
            if not ok.any():
                assert at == -1
                continue
            assert at == int(np.argmax(masked))
            tied = np.flatnonzero(masked == masked[at])
            assert n_tied == tied.shape[0]
            assert best == masked[at]
            for nth in range(n_tied):
                args = (scores, items, allowed, rem, per, lo, hi, best, nth)
                assert _nth_tied(*args) == tied[nth]
