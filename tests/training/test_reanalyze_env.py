"""The vectorized mock env replaying stored trajectories for reanalyze."""

import numpy as np
import pytest

from moozi.core.types import Trajectory
from moozi.envs.base import EnvSpec, StepOutput
from moozi.training.reanalyze_env import MockVectorEnv, Positions, TrajectorySupply
from moozi.errors import SupplyExhaustedError

SPEC = EnvSpec(name="mock:test", obs_shape=(1, 1, 2), num_actions=3, num_players=1)


def _trajectory(length: int, tag: float) -> Trajectory:
    """An episode of `length` steps whose values encode (tag, t) so every step is recognisable."""
    t = np.arange(length)
    is_last = t == length - 1
    legal = np.tile([False, True, True], (length, 1))
    legal[-1] = [True, False, False]
    return Trajectory(
        obs=np.stack([np.full((1, 1, 2), tag + i, np.float32) for i in t]),
        action=np.where(is_last, 0, 1 + t % 2).astype(np.int32),
        reward=np.where(t == 0, 0.0, tag + t / 10).astype(np.float32),
        is_first=t == 0,
        is_last=is_last,
        legal_actions=legal,
        to_play=np.full(length, -1, np.int32),
        root_value=np.full(length, -9.0, np.float32),
        action_probs=np.full((length, 3), 1 / 3, np.float32),
    )


def _assert_step(out: StepOutput, slot: int, traj: Trajectory, t: int):
    np.testing.assert_array_equal(out.obs[slot], traj.obs[t])
    assert out.obs.dtype == np.float32
    assert out.reward[slot] == traj.reward[t]
    assert out.is_first[slot] == traj.is_first[t] and out.is_last[slot] == traj.is_last[t]
    np.testing.assert_array_equal(out.legal_actions[slot], traj.legal_actions[t])
    assert out.to_play[slot] == traj.to_play[t]


def test_replays_refills_runs_out_and_records():
    a, b, c = _trajectory(3, 10.0), _trajectory(2, 20.0), _trajectory(2, 30.0)
    supply = TrajectorySupply([a, b])
    assert supply.put(c) == 2 and len(supply) == 3
    env = MockVectorEnv(supply, num_envs=2, spec=SPEC)
    assert env.spec is SPEC

    out = env.reset()  # slot 0 <- a (id 0), slot 1 <- b (id 1)
    _assert_step(out, 0, a, 0)
    _assert_step(out, 1, b, 0)
    assert out.obs.shape == (2, 1, 1, 2)
    np.testing.assert_array_equal(env.active, [True, True])
    pos = env.current_positions()
    assert isinstance(pos, Positions)
    np.testing.assert_array_equal(pos.trajectory_id, [0, 1])
    np.testing.assert_array_equal(pos.step, [0, 0])
    np.testing.assert_array_equal(env.stored_actions(), [a.action[0], b.action[0]])
    env.record(root_value=[0.5, 1.5], action_probs=[[0, 1, 0], [0, 0, 1]])

    # Step 1: actions are ignored; both advance.
    out = env.step(np.array([2, 2]), out.is_last)
    _assert_step(out, 0, a, 1)
    _assert_step(out, 1, b, 1)  # b's last step
    env.record(root_value=[0.25, 1.75], action_probs=[[0, 0.5, 0.5], [1, 0, 0]])
    assert env.pop_finished() == []

    # Step 2: slot 1's is_last input finishes b and loads c (id 2).
    out = env.step(env.stored_actions(), out.is_last)
    _assert_step(out, 0, a, 2)
    _assert_step(out, 1, c, 0)
    pos = env.current_positions()
    np.testing.assert_array_equal(pos.trajectory_id, [0, 2])
    np.testing.assert_array_equal(pos.step, [2, 0])
    (got_b,) = env.pop_finished()
    np.testing.assert_array_equal(got_b.root_value, [1.5, 1.75])
    np.testing.assert_array_equal(got_b.action_probs, [[0, 0, 1], [1, 0, 0]])
    for field in ("obs", "action", "reward", "is_first", "is_last", "legal_actions", "to_play"):
        np.testing.assert_array_equal(getattr(got_b, field), getattr(b, field), err_msg=field)
    env.record(root_value=[0.125, 2.5], action_probs=[[1, 0, 0], [0, 1, 0]])

    # Step 3: slot 0 finishes a; the supply is empty so slot 0 goes inactive with a zero step.
    out = env.step(env.stored_actions(), out.is_last)
    np.testing.assert_array_equal(env.active, [False, True])
    np.testing.assert_array_equal(out.obs[0], 0.0)
    assert not out.is_first[0] and not out.is_last[0] and out.reward[0] == 0.0
    np.testing.assert_array_equal(out.legal_actions[0], [False, False, False])
    _assert_step(out, 1, c, 1)
    pos = env.current_positions()
    np.testing.assert_array_equal(pos.trajectory_id, [-1, 2])
    np.testing.assert_array_equal(pos.step, [-1, 1])
    np.testing.assert_array_equal(env.stored_actions(), [0, c.action[1]])
    ((id_a, got_a),) = env.pop_finished(with_ids=True)
    assert id_a == 0
    np.testing.assert_array_equal(got_a.root_value, [0.5, 0.25, 0.125])
    np.testing.assert_array_equal(got_a.action_probs, [[0, 1, 0], [0, 0.5, 0.5], [1, 0, 0]])
    # The stored originals are untouched.
    np.testing.assert_array_equal(a.root_value, [-9.0, -9.0, -9.0])

    # c's last step is never recorded: it keeps its old statistics.
    out = env.step(env.stored_actions(), out.is_last)
    np.testing.assert_array_equal(env.active, [False, False])
    (got_c,) = env.pop_finished()
    np.testing.assert_array_equal(got_c.root_value, [2.5, -9.0])
    with pytest.raises(SupplyExhaustedError):
        env.step(np.zeros(2, np.int32), out.is_last)


def test_reset_on_empty_supply_raises():
    with pytest.raises(SupplyExhaustedError):
        MockVectorEnv(TrajectorySupply(), num_envs=2, spec=SPEC).reset()


def test_fewer_trajectories_than_slots():
    env = MockVectorEnv(TrajectorySupply([_trajectory(2, 1.0)]), num_envs=3, spec=SPEC)
    out = env.reset()
    np.testing.assert_array_equal(env.active, [True, False, False])
    np.testing.assert_array_equal(out.obs[1:], 0.0)
    np.testing.assert_array_equal(out.obs[0], 1.0)


def test_is_last_input_must_match_the_stored_step():
    env = MockVectorEnv(TrajectorySupply([_trajectory(3, 1.0)]), num_envs=1, spec=SPEC)
    env.reset()
    with pytest.raises(ValueError, match="is_last"):
        env.step(np.zeros(1, np.int32), np.array([True]))
