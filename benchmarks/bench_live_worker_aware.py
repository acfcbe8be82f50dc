"""Live worker-aware Opt-KG: the cost of one decision and one label in a live campaign.

Issue 17 asks that a worker-aware Opt-KG decision on a live campaign of 10^4 items and 200
workers take at most 2 ms at p99. This builds that campaign in memory
(:class:`~crowdbudget.campaign.Campaign` on an in-memory SQLite store, the object the service
runs; HTTP is measured by ``bench_service.py``), registers the 200 workers (the problem gets 256
worker slots), warms it up with ``--warmup`` labels, then times ``--decisions`` rounds of "a
random worker asks (``next_assignment``), answers (``record_label``)" with a simulated crowd
(accuracy uniform in [0.55, 0.95], truth uniform). Reported per operation: p50, p99 and max in
milliseconds of wall time, and of the thread's CPU time (``*_cpu``: what a shared machine's
other jobs do not add), and the time to register the workers (the slot rebuild, which scores all
n_items × slots pairs once); ``record_label`` also split into the labels that ran the policy's
refit (every ``refit`` labels) and the others. ``--eager`` rescores a worker's pairs at their
label instead of at their next request (``OneCoinKnowledgeGradient.lazy_workers = False``, the
behaviour before lazy rescoring; the same decisions). The live campaign spreads a full refit
over the labels after it (``refit_spread``, :mod:`crowdbudget.policies.worker_aware_refit`):
``record_label`` is then split three ways, by what the label did — ``with_refit`` (a refit's
beliefs put in place: the whole refit, or a spread one's completion, with the labels since
read again), ``refit_slices`` (a spread refit's start or one of its slices), ``without_refit``
(neither), each in wall and thread CPU time; ``--no-spread`` runs every refit at its label
(``refit_spread = 0``, the behaviour before). ``--split`` also times the pull choice's
compiled kernel (``choose_for_worker``: the scores of every distinct item state for the asking
worker, thread CPU, inside ``next_assignment``) and reports per decision its state-number
range (``n_states``: an upper bound of the distinct item states it scores, as a label may
number a state anew) and the askable items (``n_open``); a wrapper of a few µs a call, the
same decisions. ``--split`` also splits each operation's thread CPU into the policy's
part (``select`` inside ``next_assignment``, ``observe`` inside ``record_label``), the event
store's (``EventStore.append``: the event's encoding, its insert and commit) and the rest, the
campaign's own (``*_campaign_cpu``: the operation less the policy's part — the live rules'
bookkeeping, the store, the event handlers; ``*_store_cpu`` is a part of it); the timers'
own cost (two ``thread_time`` calls and a Python call a wrapped method, ~1–2 µs) lands in the
campaign's part. Run from the repository root:

    python benchmarks/bench_live_worker_aware.py [--items 10000] [--workers 200]
        [--policy opt-kg:posterior=one-coin] [--decisions 2000] [--warmup 500] [--seed 0]
        [--eager] [--no-spread] [--split]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from crowdbudget.campaign import Campaign, EventStore


def _split_choice() -> dict[str, list[float]]:
    """Wrap the pull choice's kernel (module docstring, ``--split``): its thread CPU, the item
    state numbers in use and the askable items of each call, appended to the lists returned."""
    from crowdbudget.policies import _worker_aware_fast

    kernel = _worker_aware_fast.choose_for_worker
    seen: dict[str, list[float]] = {"kernel_cpu": [], "n_states": [], "n_open": []}

    def timed(*args):  # type: ignore[no-untyped-def]
        c0 = time.thread_time()
        result = kernel(*args)
        seen["kernel_cpu"].append(time.thread_time() - c0)
        seen["n_states"].append(float(args[4]))
        seen["n_open"].append(float(result[0]))
        return result

    _worker_aware_fast.choose_for_worker = timed
    return seen


def _split_campaign(campaign: Campaign) -> dict[str, float]:
    """Wrap the campaign's policy's ``select`` and ``observe`` and its store's ``append``
    (module docstring, ``--split``) on the instances: their thread CPU, summed into the
    returned totals (read before and after an operation; a rebuilt policy is not wrapped,
    and none is rebuilt once the workers are registered)."""
    totals = {"select": 0.0, "observe": 0.0, "append": 0.0}

    def timed(owner: object, name: str) -> None:
        method = getattr(owner, name)

        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            c0 = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                totals[name] += time.thread_time() - c0

        setattr(owner, name, wrapper)

    timed(campaign.policy, "select")
    timed(campaign.policy, "observe")
    timed(campaign.store, "append")
    return totals


def run(
    policy: str,
    n_items: int,
    n_workers: int,
    n_decisions: int,
    warmup: int,
    seed: int,
    split: bool = False,
):
    seen = _split_choice() if split else None
    rng = np.random.default_rng(seed)
    items = [f"i{k}" for k in range(n_items)]
    truth = rng.integers(0, 2, n_items)
    accuracy = rng.uniform(0.55, 0.95, n_workers)
    workers = [f"w{j}" for j in range(n_workers)]
    start = time.perf_counter()
    campaign = Campaign.create(
        items, budget=10 * n_items, policy=policy, seed=seed, store=EventStore("sqlite://")
    )
    created = time.perf_counter() - start
    start = time.perf_counter()
    campaign.add_workers(workers)
    first = campaign.next_assignment(workers[0])  # the pairs are scored at the first select
    registered = time.perf_counter() - start
    assert first is not None
    campaign.record_label(first.assignment_id, "1")
    parts = _split_campaign(campaign) if split else None
    # per timed operation: the policy's and the store's thread CPU inside it (``--split``)
    shares: dict[str, list[float]] = {
        "next_assignment_policy_cpu": [],
        "next_assignment_store_cpu": [],
        "record_label_policy_cpu": [],
        "record_label_store_cpu": [],
    }
    ask, answer, kinds = [], [], []
    ask_cpu, answer_cpu = [], []
    kernel_cpu, n_states, n_open = [], [], []
    for step in range(warmup + n_decisions):
        j = int(rng.integers(n_workers))
        calls = 0 if seen is None else len(seen["kernel_cpu"])
        before = dict(parts) if parts is not None else None
        t0, c0 = time.perf_counter(), time.thread_time()
        assignment = campaign.next_assignment(workers[j])
        t1, c1 = time.perf_counter(), time.thread_time()
        middle = dict(parts) if parts is not None else None
        if assignment is None:
            continue
        item = int(assignment.item_id[1:])
        label = truth[item] if rng.random() < accuracy[j] else 1 - truth[item]
        refits_before = getattr(campaign.policy, "_last_refit", None)
        spread_before = getattr(campaign.policy, "_spread", None)
        campaign.record_label(assignment.assignment_id, str(label))
        t2, c2 = time.perf_counter(), time.thread_time()
        if step >= warmup:
            ask.append(t1 - t0)
            answer.append(t2 - t1)
            ask_cpu.append(c1 - c0)
            answer_cpu.append(c2 - c1)
            if parts is not None and before is not None and middle is not None:
                shares["next_assignment_policy_cpu"].append(middle["select"] - before["select"])
                shares["next_assignment_store_cpu"].append(middle["append"] - before["append"])
                shares["record_label_policy_cpu"].append(parts["observe"] - middle["observe"])
                shares["record_label_store_cpu"].append(parts["append"] - middle["append"])
            if seen is not None and len(seen["kernel_cpu"]) > calls:
                kernel_cpu.append(sum(seen["kernel_cpu"][calls:]))  # a retry's calls summed
                n_states.append(seen["n_states"][-1])
                n_open.append(seen["n_open"][-1])
            spread = spread_before is not None or getattr(campaign.policy, "_spread", None)
            if getattr(campaign.policy, "_last_refit", None) != refits_before:
                kinds.append("refit")  # a refit's beliefs put in place (at once or spread)
            else:
                kinds.append("slice" if spread else "other")  # a spread refit's start/slice

    def summary(times: list[float]) -> dict[str, float]:
        ms = np.asarray(times) * 1e3
        if ms.shape[0] == 0:
            return {"count": 0}
        return {
            "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)),
            "max_ms": float(ms.max()),
            "count": int(ms.shape[0]),
        }

    out = {
        "policy": policy,
        "n_items": n_items,
        "n_workers": n_workers,
        "worker_slots": campaign.problem.n_workers,
        "create_s": created,
        "register_workers_and_first_select_s": registered,
        "decisions": len(ask),
        "next_assignment": summary(ask),
        "record_label": summary(answer),
        "next_assignment_cpu": summary(ask_cpu),
        "record_label_cpu": summary(answer_cpu),
    }
    if parts is not None:
        for operation, total in (("next_assignment", ask_cpu), ("record_label", answer_cpu)):
            policy_part = np.asarray(shares[f"{operation}_policy_cpu"])
            out[f"{operation}_policy_cpu"] = summary(list(policy_part))
            out[f"{operation}_campaign_cpu"] = summary(list(np.asarray(total) - policy_part))
            out[f"{operation}_store_cpu"] = summary(shares[f"{operation}_store_cpu"])
            out[f"{operation}_campaign_cpu"]["mean_ms"] = float(
                np.mean(np.asarray(total) - policy_part) * 1e3
            )
    if seen is not None:
        out["choice_kernel_cpu"] = summary(kernel_cpu)
        for name, values in (("n_states", n_states), ("n_open", n_open)):
            v = np.asarray(values)
            out[name] = (
                {"p50": float(np.percentile(v, 50)), "max": float(v.max())} if v.size else {}
            )
    # by what the label did: "refit" (a refit's beliefs put in place: the whole refit, or
    # the completion of a spread one), "slice" (a spread refit's start or slice), "other"
    parts = {"with_refit": "refit", "refit_slices": "slice", "without_refit": "other"}
    for name, kind in parts.items():
        for suffix, times in (("", answer), ("_cpu", answer_cpu)):
            out[f"record_label_{name}{suffix}"] = summary(
                [t for t, k in zip(times, kinds, strict=True) if k == kind]
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--policy", default="opt-kg:posterior=one-coin")
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eager", action="store_true", help="rescore at the label (as before)")
    parser.add_argument(
        "--split",
        action="store_true",
        help="time the pull choice's kernel, the policy's and the store's parts",
    )
    parser.add_argument(
        "--no-spread", action="store_true", help="each refit at its label (refit_spread 0)"
    )
    args = parser.parse_args()
    if args.no_spread:
        from crowdbudget.policies import worker_aware_refit

        worker_aware_refit.LIVE_REFIT_SPREAD = 0
    if args.eager:
        from crowdbudget.policies.worker_aware import OneCoinKnowledgeGradient

        OneCoinKnowledgeGradient.lazy_workers = False
    result = run(
        args.policy, args.items, args.workers, args.decisions, args.warmup, args.seed, args.split
    )
    result["machine"] = f"{platform.machine()} {platform.python_version()}"
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
