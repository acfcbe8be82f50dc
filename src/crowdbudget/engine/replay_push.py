"""The campaign loop of a push-mode replay whose policy takes labels in compiled runs.

:func:`~crowdbudget.engine.loop.drive` with the discrete push clock (one arrival per step,
zero work time) and no live rules is, label by label: the recorder's checkpoint, the policy's
choice, the state's reservation, the world's record, the state's label, the policy's observe,
the item's eligibility. The worker-aware Opt-KG default on a replay takes many such labels in
one compiled call (:func:`~crowdbudget.policies._push_replay.take_labels`, between its
refits); :func:`drive_replay_push` runs that loop — the compiled calls where the policy can,
the steps above one by one where it cannot (its first choice, a choice its bounds leave to the
scan, the end of the budget) — with the same events in the same order
(``tests/test_push_replay.py`` compares whole campaigns with :func:`drive`'s).
"""

from __future__ import annotations

from typing import Any

from crowdbudget._lean_load import lean_loads
from crowdbudget.engine.loop import CheckpointRecorder, Clock, Outcome
from crowdbudget.policies import _push_replay
from crowdbudget.policies._push_replay import replay_ready, take_labels
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import CampaignState

# the compiled runs' kernel loads without Numba's whole target set-up (the same code)
lean_loads(_push_replay)


def supports(policy: Any, env: Any, clock: Any, recorder: Any) -> bool:
    """Whether :func:`drive_replay_push` may run this campaign: a push-mode :class:`Clock`, a
    :class:`~crowdbudget.simulation.replay.ReplayEnvironment` itself on two classes, a
    :class:`~crowdbudget.engine.loop.CheckpointRecorder` and a policy that offers compiled
    runs (``compiled_replay``; the policy's own checks follow at every step)."""
    return (
        type(clock) is Clock
        and not clock.pull
        and type(env) is ReplayEnvironment
        and env.n_classes == 2
        and type(recorder) is CheckpointRecorder
        and bool(getattr(policy, "compiled_replay", False))
    )


def drive_replay_push(
    policy: Any, env: LabelingEnvironment, state: CampaignState, recorder: CheckpointRecorder
) -> Outcome:
    """:func:`~crowdbudget.engine.loop.drive` for :func:`supports`'s campaigns (module
    docstring): the same labels, states and draws."""
    assert isinstance(env, ReplayEnvironment)  # supports() said so
    handed = 0
    while True:
        if recorder.before_decision(state):
            return _finish(recorder, state, handed, float(handed + 1))
        if replay_ready(policy, state):
            world = env.record_arrays()
            n_taken, ended = take_labels(policy, state, world, recorder.next_checkpoint())
            env.records_used(world)
            handed += n_taken
            if ended:
                return _finish(recorder, state, handed, float(handed))
            if n_taken:
                continue
        # one step as drive takes it (the policy decides in Python)
        assignment = policy.select(state)
        if assignment is None:
            return _finish(recorder, state, handed, float(handed + 1))
        state.record_assignment(assignment)
        handed += 1
        result = env.step(assignment)
        if result.event is None:
            state.release_assignment(assignment)
        else:
            state.record_label(result.event, assignment)
            policy.observe(result.event)
        if env.eligible is not None and not env.eligible[assignment.item]:
            state.eligible[assignment.item] = False
        if result.terminated or result.truncated:
            return _finish(recorder, state, handed, float(handed))


def _finish(recorder: CheckpointRecorder, state: CampaignState, handed: int, now: float) -> Outcome:
    """The recorder's last row; nothing is pending at the end of a step."""
    recorder.finish(state)
    return Outcome(handed, 0, now)
