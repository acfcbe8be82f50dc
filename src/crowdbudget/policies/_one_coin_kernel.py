"""Compiled scoring of the one-coin worker-aware fast path at d = 1/2.

A refit of ``opt-kg:posterior=one-coin`` (``refit=N``, the registry's default) changes every
item's and every worker's Beta, so every live (item, worker) pair is rescored. In NumPy that
pass was about twenty array operations over all pairs (keys, gathers, a dedup, the fused
look-ahead on the distinct keys, the scatter, the rounding) plus three ``np.unique`` sorts per
refit: on trec (88,385 pairs, a refit every 10 labels) most of a campaign's time, while the
``betainc`` calls themselves were an eighth of it. :func:`rescore_pairs` does the same pass in
one compiled loop.

Same bits. Each step is the operation of the NumPy path in the same order, on float64 scalars
instead of arrays — IEEE-754 gives the same result either way (Numba compiles without
fast-math, so nothing is reassociated or fused):

- the per-item moments (:func:`fill_moments`) are those of
  :func:`~crowdbudget.posteriors.one_coin._beta_moments` for the two orientations ``(b, a)``
  (a label 0) and ``(a, b)`` (a label 1), as ``OneCoinKnowledgeGradient._prepare_fused`` stores
  them;
- a pair's look-ahead is ``_score_fused``'s: ``z1``, the matched mean and second moment, the
  variance floor, ``s``, ``(na, nb)``, the error ``1/2`` when ``na == nb`` else
  I_{1/2}(max, min) from the table kernel
  :func:`~crowdbudget._betainc_half_table.betainc_half_small` (within 1e-14 of SciPy's
  ``betainc``, about 6× faster where the beliefs are small; Boost's ``ibeta`` outside its
  region), whose ufunc :func:`~crowdbudget._betainc_half_table.half_error` the NumPy path
  calls (checked bit for bit in ``tests/test_worker_aware_speed.py``); ``np.maximum`` /
  ``np.minimum`` are NaN-propagating here too;
- the score is ``_combine``'s (Opt-KG: the larger reward; KG: the expectation) rounded to 40
  significant bits as :func:`~crowdbudget.policies._index.canonical_scores` rounds (NaN → −∞).

The error of an oriented state under a worker reliability is computed once per distinct
``(ta, tb, r)`` (an open-addressing table keyed by the three floats' bits): the NumPy path's
sharing of mirrored states and of items in the same state, without its sorts.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from crowdbudget._betainc_half_table import betainc_half_small as _betainc_half
from crowdbudget._compiled_special import maximum as _maximum
from crowdbudget._compiled_special import minimum as _minimum
from crowdbudget.posteriors.one_coin import _S_FLOOR
from crowdbudget.types import FloatArray, IntArray

_MANTISSA_SCALE = 2.0**40  # policies._index._MANTISSA_BITS
_HASH_MULTIPLIER = 0x9E3779B97F4A7C15 - (1 << 64)  # as int64


@njit(cache=True, nogil=True)
def canonical(x: float) -> float:
    """:func:`~crowdbudget.policies._index.canonical_scores` of one value: NaN → −∞, else
    rounded to 40 significant bits, half to even.

    On the bits of a normal number: the 53-bit significand loses its low 13 bits, rounded
    half to even (add 0xFFF plus the kept part's lowest bit, then clear the 13 bits; a carry
    out of the significand steps the exponent, as ``ldexp(round(m·2⁴⁰)/2⁴⁰, e)`` does when m
    rounds up to 1, up to ±inf). Zeros, subnormals and infinities take ``frexp``/``ldexp``
    (a subnormal has fewer than 53 significant bits: rounding its stored bits would differ)."""
    if x != x:
        return -np.inf
    bits = _as_bits(x)
    magnitude = bits & 0x7FFFFFFFFFFFFFFF
    exponent_field = magnitude >> 52
    if exponent_field == 0 or exponent_field == 0x7FF:  # zero, subnormal, inf
        if x == 0.0 or math.isinf(x):
            return x
        mantissa, exponent = math.frexp(x)
        return math.ldexp(np.rint(mantissa * _MANTISSA_SCALE) / _MANTISSA_SCALE, exponent)
    magnitude += 0xFFF + ((magnitude >> 13) & 1)
    magnitude &= ~np.int64(0x1FFF)
    return _from_bits((bits & ~np.int64(0x7FFFFFFFFFFFFFFF)) | magnitude)


def _bitcast(source: Any, target: Any) -> Any:
    """An intrinsic reinterpreting a ``source`` value's bits as ``target`` (an LLVM bitcast:
    no memory, no call)."""

    def typer(typingctx: Any, value: Any) -> Any:
        if value != source:
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(source), codegen

    return intrinsic(typer)


# compiled-code-only functions (typed Any: mypy cannot see through the intrinsic decorator)
_as_bits: Any = _bitcast(types.float64, types.int64)
_from_bits: Any = _bitcast(types.int64, types.float64)


#: an int64 zero and an int64 ``True`` for compiled code (typed ``Any``: mypy reads them as
#: NumPy scalars): a literal ``0`` or ``True`` that reaches a compiled callee — as an
#: argument, or as the start of a loop-carried value — makes Numba compile the callee (and
#: every callee below it) once more for the literal's type, seconds of a cold compile
#: (benchmarks/README.md, 2026-12-07; ``_push_bounds._sort_ascending`` lists the other causes)
ZERO: Any = np.int64(0)
TRUE: Any = np.bool_(True)


@njit(cache=True, nogil=True)
def fill_moments(a: FloatArray, b: FloatArray, moments: FloatArray) -> None:
    """``moments[i, o]`` = the six moments of item i's orientation o (0: ``(b, a)``, a label 0;
    1: ``(a, b)``, a label 1): E[θ], 1 − E[θ], E[θ²], E[θ³], E[θ(1−θ)], E[θ²(1−θ)]."""
    for i in range(a.shape[0]):
        fill_item_moments(i, a, b, moments)


@njit(cache=True, nogil=True)
def fill_item_moments(i: int, a: FloatArray, b: FloatArray, moments: FloatArray) -> None:
    """:func:`fill_moments` of item i alone."""
    for o in range(2):
        ta = b[i] if o == 0 else a[i]
        tb = a[i] if o == 0 else b[i]
        n = ta + tb
        m1 = ta / n
        m2 = m1 * (ta + 1.0) / (n + 1.0)
        m3 = m2 * (ta + 2.0) / (n + 2.0)
        moments[i, o, 0] = m1
        moments[i, o, 1] = 1.0 - m1
        moments[i, o, 2] = m2
        moments[i, o, 3] = m3
        moments[i, o, 4] = m1 * tb / (n + 1.0)
        moments[i, o, 5] = m2 * tb / (n + 2.0)


@njit(cache=True, nogil=True)
def refresh_items(
    items: IntArray,
    a: FloatArray,
    b: FloatArray,
    moments: FloatArray,
    item_error: FloatArray,
    state_ids: IntArray,
    first_id: int,
) -> int:
    """:func:`fill_moments`, :func:`item_errors` and :func:`number_states` of ``items`` only
    (distinct items): each item's values are a function of its own (a, b), so the items left
    out keep theirs — the bits a full pass gives when their (a, b) did not change. The error
    is evaluated once per new state number; returns the next unused number."""
    next_id = number_states(items, a, b, state_ids, first_id)
    error_of = np.empty(next_id - first_id)
    done = np.zeros(next_id - first_id, dtype=np.bool_)
    for k in range(items.shape[0]):
        i = items[k]
        fill_item_moments(i, a, b, moments)
        s = state_ids[i] - first_id
        if not done[s]:
            if a[i] == b[i]:
                error_of[s] = 0.5
            else:
                error_of[s] = _betainc_half(_maximum(a[i], b[i]), _minimum(a[i], b[i]))
            done[s] = True
        item_error[i] = error_of[s]
    return next_id


@njit(cache=True, nogil=True)
def _error_after(moments: FloatArray, i: int, o: int, r: float, omr: float) -> float:
    """The error probability after a label of a worker of mean reliability r on item i's
    orientation o, whose moments are ``moments[i, o]`` (``_score_fused``'s operations,
    d = 1/2). Read in place: a view ``moments[i, o]`` per call takes and drops a reference
    to the array — two atomic operations, a tenth of a push replay's time."""
    z1 = moments[i, o, 0] * r + moments[i, o, 1] * omr
    mean = (moments[i, o, 2] * r + moments[i, o, 4] * omr) / z1
    second = (moments[i, o, 3] * r + moments[i, o, 5] * omr) / z1
    spread = mean * (1.0 - mean)
    var = _maximum(second - mean * mean, spread * 1e-15)
    s = _maximum(spread / var - 1.0, _S_FLOOR)
    na = mean * s
    nb = (1.0 - mean) * s
    if na == nb:
        return 0.5
    return _betainc_half(_maximum(na, nb), _minimum(na, nb))


@njit(cache=True, nogil=True)
def _slot(keys: IntArray, k0: int, k1: int, k2: int) -> int:
    """The slot of the key (k0, k1, k2) in the open-addressing table ``keys`` (rows of three
    int64; an empty row holds -1 in column 0, which no float's bits of a positive number or
    of a reliability in [0, 1] give), or the empty slot ending its probe sequence."""
    mask = keys.shape[0] - 1
    h = (k0 * _HASH_MULTIPLIER) ^ (k1 * 31 + k2)
    h = (h ^ (h >> 29)) & mask
    while True:
        if keys[h, 0] == -1 or (keys[h, 0] == k0 and keys[h, 1] == k1 and keys[h, 2] == k2):
            return h
        h = (h + 1) & mask


@njit(cache=True, nogil=True)
def _grown(keys: IntArray, errors: FloatArray, size: int) -> tuple[IntArray, FloatArray]:
    """The table rehashed into ``size`` rows."""
    new_keys = np.full((size, 3), -1, dtype=np.int64)
    new_errors = np.empty(size)
    for h in range(keys.shape[0]):
        if keys[h, 0] != -1:
            slot = _slot(new_keys, keys[h, 0], keys[h, 1], keys[h, 2])
            new_keys[slot, 0] = keys[h, 0]
            new_keys[slot, 1] = keys[h, 1]
            new_keys[slot, 2] = keys[h, 2]
            new_errors[slot] = errors[h]
    return new_keys, new_errors


@njit(cache=True, nogil=True)
def rescore_pairs(
    pairs: IntArray,
    pair_items: IntArray,
    pair_workers: IntArray,
    a: FloatArray,
    b: FloatArray,
    moments: FloatArray,
    reliability: FloatArray,
    item_error: FloatArray,
    optimistic: bool,
    scores: FloatArray,
) -> int:
    """``scores[pairs]`` = the canonical Opt-KG (``optimistic``) or KG score of each pair at
    d = 1/2; returns the number of ``betainc`` evaluations (distinct ``(ta, tb, r)``)."""
    # sized by the distinct keys, not the pairs (a few thousand against 10^5 pairs on trec:
    # a small table stays in cache), doubled when half full — between runs of
    # :func:`_rescore_run`, so that no loop rebinds the table: Numba takes and drops a
    # reference to an array a loop may rebind at every pass (two atomic operations; a
    # tenth of a push replay's time when the table was grown inside the loop)
    size = 1024
    keys = np.full((size, 3), -1, dtype=np.int64)
    errors = np.empty(size)
    start = ZERO  # not the literal 0 (see ZERO)
    evaluated = ZERO
    while True:
        start, evaluated = _rescore_run(
            start, evaluated, pairs, pair_items, pair_workers, a, b, moments, reliability,
            item_error, optimistic, scores, keys, errors,
        )  # fmt: skip
        if start == pairs.shape[0]:
            return evaluated
        keys, errors = _grown(keys, errors, 2 * keys.shape[0])


@njit(cache=True, nogil=True)
def _rescore_run(
    start: int,
    evaluated: int,
    pairs: IntArray,
    pair_items: IntArray,
    pair_workers: IntArray,
    a: FloatArray,
    b: FloatArray,
    moments: FloatArray,
    reliability: FloatArray,
    item_error: FloatArray,
    optimistic: bool,
    scores: FloatArray,
    keys: IntArray,
    errors: FloatArray,
) -> tuple[int, int]:
    """:func:`rescore_pairs` from ``pairs[start]`` on, until a new key would fill the table
    ``(keys, errors)`` past half; returns where it stopped (that pair not scored: it starts
    the next run, which finds its keys already in the table) and the evaluations so far."""
    size = keys.shape[0]
    a_bits = a.view(np.int64)
    b_bits = b.view(np.int64)
    r_bits = reliability.view(np.int64)
    for n in range(start, pairs.shape[0]):
        p = pairs[n]
        i = pair_items[p]
        w = pair_workers[p]
        r = reliability[w]
        omr = 1.0 - r
        err0 = 0.0
        err1 = 0.0
        for o in range(2):
            # orientation 0 is the item's (b, a), 1 its (a, b)
            ta = b_bits[i] if o == 0 else a_bits[i]
            tb = a_bits[i] if o == 0 else b_bits[i]
            h = _slot(keys, ta, tb, r_bits[w])
            if keys[h, 0] == -1:
                if 2 * (evaluated + 1) > size:
                    return n, evaluated
                keys[h, 0] = ta
                keys[h, 1] = tb
                keys[h, 2] = r_bits[w]
                errors[h] = _error_after(moments, i, o, r, omr)
                evaluated += 1
            if o == 0:
                err0 = errors[h]
            else:
                err1 = errors[h]
        scores[p] = _pair_score(moments, i, r, omr, item_error[i], err0, err1, optimistic)
    return pairs.shape[0], evaluated


@njit(cache=True, nogil=True)
def _pair_score(
    moments: FloatArray,
    i: int,
    r: float,
    omr: float,
    now: float,
    err0: float,
    err1: float,
    optimistic: bool,
) -> float:
    """The canonical score of a pair of item i from its current error ``now`` and its errors
    after a label 0 / 1 (``err0``, ``err1``); ``moments[i, 1]`` its label-1 moments (KG's
    P(1); read in place, as :func:`_error_after`)."""
    r0 = now - err0
    r1 = now - err1
    if optimistic:
        return canonical(_maximum(r1, r0))
    p1 = moments[i, 1, 0] * r + moments[i, 1, 1] * omr
    return canonical(p1 * r1 + (1.0 - p1) * r0)


@njit(cache=True, nogil=True)
def number_states(
    items: IntArray, a: FloatArray, b: FloatArray, state_ids: IntArray, first_id: int
) -> int:
    """``state_ids[items]`` = numbers from ``first_id`` on, one per distinct (a, b) (by the
    floats' bits) among ``items``; returns the next unused number. Equal numbers mean equal
    states; equal states may hold different numbers (they are then scored twice)."""
    size = 16
    while size < 2 * items.shape[0]:
        size *= 2
    keys = np.full((size, 3), -1, dtype=np.int64)
    numbers = np.empty(size, dtype=np.int64)
    a_bits = a.view(np.int64)
    b_bits = b.view(np.int64)
    next_id = first_id
    for k in range(items.shape[0]):
        i = items[k]
        h = _slot(keys, a_bits[i], b_bits[i], ZERO)
        if keys[h, 0] == -1:
            keys[h, 0] = a_bits[i]
            keys[h, 1] = b_bits[i]
            keys[h, 2] = 0
            numbers[h] = next_id
            next_id += 1
        state_ids[i] = numbers[h]
    return next_id


@njit(cache=True, nogil=True)
def choose_for_worker(
    worker_pairs: IntArray,
    pair_items: IntArray,
    grid: bool,
    state_ids: IntArray,
    n_states: int,
    moments: FloatArray,
    reliability: float,
    item_error: FloatArray,
    optimistic: bool,
    remaining: IntArray,
    open_items: Any,
    tied: IntArray,
) -> tuple[int, int, float]:
    """One pull-mode decision over one worker's pairs (``worker_pairs``, ascending), in one
    pass: the masked argmax over the askable pairs (``open_items[item]``, and a recorded
    label left if ``remaining`` is not empty) of the pairs' current scores.

    The scores are computed, not read: :func:`rescore_pairs`'s score of a pair, bit for bit,
    once per item state number (``state_ids``, < ``n_states``). A pair's score reads the
    item's moments and current error and the worker's reliability; the reliability is one
    number here, and the moments and the error are functions of the item's (a, b) alone (the
    same operations on the same bits wherever they were computed: :func:`fill_moments`,
    :func:`item_errors`, :func:`refresh_items`, the policy's scalar update), so the items of
    one state number share one score — the score a kept, current pair score holds. Nothing is
    written to the kept scores: the pairs are read in worker order, and a full grid of pairs
    (``grid``: pair = item · n_workers + worker, so the worker's n-th pair is item n) reads
    no pair array at all, where writing the kept scores would touch one cache line per pair.

    ``tied[:n_tied]`` are the positions in ``worker_pairs`` of the pairs at the largest score,
    in pair order — what the masked scan ``flatnonzero(masked == max)`` gives when the max is
    finite. Returns ``(n_open, n_tied, best)``: the number of askable pairs, the number tied
    and the largest score."""
    omr = 1.0 - reliability
    state_score = np.empty(n_states)
    done = np.zeros(n_states, dtype=np.bool_)
    has_remaining = remaining.shape[0] > 0
    best = -np.inf
    n_open = 0
    n_tied = 0
    for n in range(worker_pairs.shape[0]):
        i = n if grid else pair_items[worker_pairs[n]]
        if not open_items[i] or (has_remaining and remaining[worker_pairs[n]] <= 0):
            continue
        s = state_ids[i]
        if not done[s]:
            state_score[s] = _pair_score(
                moments,
                i,
                reliability,
                omr,
                item_error[i],
                _error_after(moments, i, 0, reliability, omr),
                _error_after(moments, i, 1, reliability, omr),
                optimistic,
            )
            done[s] = True
        value = state_score[s]
        n_open += 1
        if value > best:
            best = value
            n_tied = 0
        if value == best:
            tied[n_tied] = n
            n_tied += 1
    return n_open, n_tied, best


@njit(cache=True, nogil=True)
def update_worker_bests(
    pairs: IntArray,
    before: FloatArray,
    scores: FloatArray,
    pair_workers: IntArray,
    skip_worker: int,
    stale: Any,
    top: FloatArray,
    count: IntArray,
    ptr: IntArray,
    order: IntArray,
) -> None:
    """The per-worker bests (``WorkerBest.best``/``count``) after ``pairs`` (one item's, one
    per worker) moved from ``before`` to ``scores[pairs]``: O(1) per worker, a rescan of the
    worker's pairs only when its last pair at the best went down (``WorkerBest.refresh_one``'s
    max and count); ``skip_worker`` and stale workers are left alone (refreshed elsewhere)."""
    for n in range(pairs.shape[0]):
        p = pairs[n]
        w = pair_workers[p]
        old = before[n]
        new = scores[p]
        if w == skip_worker or old == new or stale[w]:
            continue
        current = top[w]
        if new > current:
            top[w] = new
            count[w] = 1
        elif new == current:
            count[w] += 1
        elif old == current:
            count[w] -= 1
            if count[w] <= 0:
                best = -np.inf
                multiplicity = 0
                for k in range(ptr[w], ptr[w + 1]):
                    value = scores[order[k]]
                    if value > best:
                        best = value
                        multiplicity = 1
                    elif value == best:
                        multiplicity += 1
                top[w] = best
                count[w] = multiplicity


@njit(cache=True, nogil=True)
def item_errors(a: FloatArray, b: FloatArray, out: FloatArray) -> int:
    """``out`` = :func:`~crowdbudget.posteriors.beta_bernoulli.error_probability` of every item
    at d = 1/2 with ``table=True`` (``1/2`` where a = b, else I_{1/2}(max, min) by the table
    kernel), each distinct ``(max, min)`` evaluated once; returns the number of evaluations."""
    size = 1024
    keys = np.full((size, 3), -1, dtype=np.int64)
    errors = np.empty(size)
    a_bits = a.view(np.int64)
    b_bits = b.view(np.int64)
    evaluated = 0
    for i in range(a.shape[0]):
        if a[i] == b[i]:
            out[i] = 0.5
            continue
        hi = _maximum(a[i], b[i])
        lo = _minimum(a[i], b[i])
        # the key: the bits of (a, b) in (larger, smaller) order — a function of (a, b) that
        # mirrored states share, as they share (hi, lo)
        if a[i] >= b[i]:
            k0, k1 = a_bits[i], b_bits[i]
        else:
            k0, k1 = b_bits[i], a_bits[i]
        h = _slot(keys, k0, k1, ZERO)
        if keys[h, 0] == -1:
            if 2 * (evaluated + 1) > size:
                size *= 2
                keys, errors = _grown(keys, errors, size)
                h = _slot(keys, k0, k1, ZERO)
            keys[h, 0] = k0
            keys[h, 1] = k1
            keys[h, 2] = 0
            errors[h] = _betainc_half(hi, lo)
            evaluated += 1
        out[i] = errors[h]
    return evaluated


@njit(cache=True, nogil=True, inline="always")
def beta_moments(ta: float, tb: float) -> tuple[float, float, float, float, float]:
    """``one_coin._beta_moments`` of Beta(ta, tb) on scalars: E[t], E[t²], E[t³], E[t(1−t)],
    E[t²(1−t)] (each from the last by one ratio, so no power is formed)."""
    total = ta + tb
    t1 = ta / total
    t2 = t1 * (ta + 1.0) / (total + 1.0)
    t3 = t2 * (ta + 2.0) / (total + 2.0)
    t1m = t1 * tb / (total + 1.0)
    t21m = t2 * tb / (total + 2.0)
    return t1, t2, t3, t1m, t21m


@njit(cache=True, nogil=True, inline="always")
def matched(mean: float, second: float) -> tuple[float, float]:
    """``one_coin._match_scalar``: the Beta of these two moments. The variance floor and the
    size floor keep the Beta finite when the matched variance rounds to 0 or exceeds the
    mean's spread (``_maximum`` is NumPy's, NaN-propagating, as the scalar path's)."""
    spread = mean * (1.0 - mean)
    var = _maximum(second - mean * mean, spread * 1e-15)
    s = _maximum(spread / var - 1.0, _S_FLOOR)
    return mean * s, (1.0 - mean) * s


@njit(cache=True, nogil=True, inline="always")
def matched_after(ta: float, tb: float, r1: float, q1: float) -> tuple[float, float]:
    """Item Beta(ta, tb) after a label 1 from a worker of mean reliability r1 (q1 = 1 − r1),
    the worker held fixed: the paper's moment matching (Chen, Lin, Zhou 2013, §4),
    ``_theta_after`` then ``_match``. A label 0 is the same steps on (tb, ta), mirrored."""
    t1, t2, t3, t1m, t21m = beta_moments(ta, tb)
    z1 = t1 * r1 + (1.0 - t1) * q1
    return matched((t2 * r1 + t1m * q1) / z1, (t3 * r1 + t21m * q1) / z1)


@njit(cache=True, nogil=True)
def match_label(ai: float, bi: float, r1: float, up: bool) -> tuple[float, float]:
    """Item Beta(ai, bi) after one label of a worker of mean reliability ``r1`` (``up``: the
    label is 1), the worker held fixed (:func:`matched_after`, a label 0 on (a, b) being a
    label 1 on (b, a), swapped back). The one item step of the refits (:func:`reestimate`,
    the incremental re-read), so both give these bits."""
    if up:
        return matched_after(ai, bi, r1, 1.0 - r1)
    nb, na = matched_after(bi, ai, r1, 1.0 - r1)
    return na, nb


@njit(cache=True, nogil=True)
def reestimate(
    items: IntArray,
    workers: IntArray,
    labels: IntArray,
    prior_a: FloatArray,
    prior_b: FloatArray,
    c: FloatArray,
    d: FloatArray,
    c0: float,
    d0: float,
    n_rounds: int,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """The refit's rounds with the paper's sequential item step (``OneCoinKnowledgeGradient.
    _reestimate_beliefs``, ``refit_items="sequential"``): ``(a, b, c, d)``.

    Each round: every item restarts from its prior and reads its labels in arrival order by
    the moment matching of ``_theta_after`` (a label 0 on (a, b) is a label 1 on (b, a),
    swapped back) with the workers' mean reliabilities of the round's start; then every
    worker's Beta is its prior plus the expected agreements, summed in label order (what
    ``np.bincount`` sums). The NumPy path reads rank k of every item at once; items do not
    interact within a round, so reading the log in order is the same sequence per item, the
    same bits."""
    n_workers = c.shape[0]
    a = prior_a.copy()
    b = prior_b.copy()
    answered = np.zeros(n_workers, dtype=np.int64)
    for n in range(workers.shape[0]):
        answered[workers[n]] += 1
    reliability = np.empty(n_workers)
    mean = np.empty(a.shape[0])
    right = np.empty(n_workers)
    for _ in range(n_rounds):
        for w in range(n_workers):
            reliability[w] = c[w] / (c[w] + d[w])
        for i in range(a.shape[0]):  # a loop, not a[:] = prior_a (_push_bounds._sort_ascending)
            a[i] = prior_a[i]
            b[i] = prior_b[i]
        for n in range(items.shape[0]):
            i = items[n]
            a[i], b[i] = match_label(a[i], b[i], reliability[workers[n]], labels[n] == 1)
        # an item's mean once per item, not once per label (the same division on the same
        # bits, so the same sums)
        for i in range(a.shape[0]):
            mean[i] = a[i] / (a[i] + b[i])
        right[:] = 0.0
        for n in range(items.shape[0]):
            m = mean[items[n]]
            right[workers[n]] += m if labels[n] == 1 else 1.0 - m
        # c0 + right and d0 + (answered − right), elementwise as NumPy's (a loop: an array
        # expression would make a load of this kernel import Numba's ufunc machinery)
        c = np.empty(n_workers)
        d = np.empty(n_workers)
        for w in range(n_workers):
            c[w] = c0 + right[w]
            d[w] = d0 + (float(answered[w]) - right[w])
    return a, b, c, d
