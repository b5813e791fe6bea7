"""Training targets from flat step storage (thesis 5.2.8), against hand-computed numbers."""

from __future__ import annotations

import functools

import chex
import numpy as np
import pytest

from moozi.core.targets import (
    BootstrapSource,
    StepStorage,
    TargetConfig,
    make_targets,
    n_step_return_parts,
    n_step_returns,
    trajectory_value_difference,
)
from moozi.errors import MooziError


def _storage(num_slots, num_actions, obs_shape=(1, 1, 1)):
    """Storage whose every slot holds garbage from a 'foreign' long episode, so a
    read that escapes its own episode shows up as a wrong number."""
    rng = np.random.default_rng(123)
    return StepStorage(
        obs=rng.uniform(50, 60, (num_slots, *obs_shape)).astype(np.float32),
        action=rng.integers(1, num_actions, num_slots).astype(np.int32),
        reward=rng.uniform(50, 60, num_slots).astype(np.float32),
        root_value=rng.uniform(50, 60, num_slots).astype(np.float32),
        action_probs=np.full((num_slots, num_actions), 7.0, np.float32),
        step_index=np.full(num_slots, 50, np.int32),
        episode_length=np.full(num_slots, 100, np.int32),
    )


def _write(storage, start, obs, action, reward, root_value, action_probs):
    """Writes one episode at slots start, start+1, ... (wrapping); returns its slots."""
    length = len(action)
    slots = (start + np.arange(length)) % storage.step_index.shape[0]
    storage.obs[slots] = obs
    storage.action[slots] = action
    storage.reward[slots] = reward
    storage.root_value[slots] = root_value
    storage.action_probs[slots] = action_probs
    storage.step_index[slots] = np.arange(length)
    storage.episode_length[slots] = length
    return slots


# One-player episode, T = 4, A = 3, written across the end of an 8-slot storage.
A1 = 3
OBS1 = np.arange(1, 5, dtype=np.float32).reshape(4, 1, 1, 1)  # o_t = t + 1
ACT1 = np.array([2, 1, 2, 0])  # a_3 is the dummy
REW1 = np.array([0.0, 1.0, 2.0, 3.0])
VAL1 = np.array([10.0, 20.0, 30.0, 40.0])
PROBS1 = np.array([[0.0, 0.25, 0.75], [0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def _one_player():
    storage = _storage(8, A1)
    slots = _write(storage, 6, OBS1, ACT1, REW1, VAL1, PROBS1)  # slots 6, 7, 0, 1
    return storage, slots


class MakeTargetsTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_one_player_n_step_returns_and_absorbing_steps(self):
        storage, slots = _one_player()
        config = TargetConfig(history_length=2, num_unroll_steps=2, td_steps=2, discount=0.5)
        fn = self.variant(functools.partial(make_targets, config=config, num_actions=A1, discount_sign=1.0))
        out = fn(storage, slots)
        # G_t = r_{t+1} + 0.5 r_{t+2} + 0.25 v*_{t+2}, bootstrap only when t + 2 < T - 1 = 3:
        #   G_0 = 1 + 1 + 0.25 * 30 = 9.5, G_1 = 2 + 1.5 = 3.5, G_2 = 3, G_3 = 0, past the end 0.
        np.testing.assert_allclose(out.partial_return, [[2, 3.5, 3], [3.5, 3, 0], [3, 0, 0], [0, 0, 0]])
        np.testing.assert_allclose(out.bootstrap_discount, [[0.25, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
        np.testing.assert_allclose(out.bootstrap_value, [[30, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
        np.testing.assert_allclose(n_step_returns(out), [[9.5, 3.5, 3], [3.5, 3, 0], [3, 0, 0], [0, 0, 0]])
        # Unroll: a_t, a_{t+1} (dummy past the end), r_{t+1}, r_{t+2} (0 past the end).
        np.testing.assert_array_equal(out.actions, [[2, 1], [1, 2], [2, 0], [0, 0]])
        np.testing.assert_allclose(out.rewards, [[1, 2], [2, 3], [3, 0], [0, 0]])
        np.testing.assert_allclose(out.root_values, [[10, 20, 30], [20, 30, 40], [30, 40, 0], [40, 0, 0]])
        np.testing.assert_array_equal(out.policy_mask, [[1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 0, 0]])
        dummy = [1.0, 0.0, 0.0]
        np.testing.assert_allclose(out.action_probs[2], [PROBS1[2], PROBS1[3], dummy])
        np.testing.assert_allclose(out.action_probs[3], [PROBS1[3], dummy, dummy])
        np.testing.assert_allclose(out.action_probs[0], PROBS1[:3])
        np.testing.assert_array_equal(out.consistency_mask, [1, 1, 1, 0])
        np.testing.assert_array_equal(out.importance_weight, [1, 1, 1, 1])
        self.assertIsNone(out.bootstrap_stacked_obs)

    @chex.variants(with_jit=True, without_jit=True)
    def test_history_before_the_start_and_next_stacked_obs(self):
        storage, slots = _one_player()
        config = TargetConfig(history_length=2, num_unroll_steps=2, td_steps=2, discount=0.5)
        fn = self.variant(functools.partial(make_targets, config=config, num_actions=A1, discount_sign=1.0))
        out = fn(storage, slots)
        third = 1.0 / 3.0
        # Channels: o_{t-1}, o_t, one_hot(a_{t-2}) / 3, one_hot(a_{t-1}) / 3 (H = W = C = 1).
        expected = np.array([
            [0, 1, third, 0, 0, third, 0, 0],  # t=0: zero frame, o_0; dummy, dummy
            [1, 2, third, 0, 0, 0, 0, third],  # t=1: o_0, o_1; dummy, a_0 = 2
            [2, 3, 0, 0, third, 0, third, 0],  # t=2: o_1, o_2; a_0 = 2, a_1 = 1
            [3, 4, 0, third, 0, 0, 0, third],  # t=3: o_2, o_3; a_1 = 1, a_2 = 2
        ])
        np.testing.assert_allclose(np.asarray(out.stacked_obs).reshape(4, 8), expected, rtol=1e-6)
        # next_stacked_obs at t is the stacked obs at t + 1; past the last step: a zero frame.
        np.testing.assert_allclose(out.next_stacked_obs[:3], out.stacked_obs[1:])
        np.testing.assert_allclose(np.asarray(out.next_stacked_obs[3]).reshape(8),
                                   [4, 0, 0, 0, third, third, 0, 0], rtol=1e-6)

    # Jitted only: eager dispatch compiles every op for these new shapes (~5 s) and the
    # maths is the code the un-jitted tests above already run.
    @chex.variants(with_jit=True)
    def test_two_player_sign_alternation(self):
        storage = _storage(16, 4)
        reward = np.array([0.0, 0.5, 0.0, 2.0, 1.0])  # reward of the player who just acted
        value = np.array([0.1, 0.2, 0.3, 0.4, 0.5])  # from the player to move
        slots = _write(storage, 3, np.zeros((5, 1, 1, 1)), np.array([1, 2, 3, 1, 0]), reward, value,
                       np.full((5, 4), 0.25))
        config = TargetConfig(history_length=1, num_unroll_steps=1, td_steps=3, discount=0.5)
        fn = self.variant(functools.partial(make_targets, config=config, num_actions=4, discount_sign=-1.0))
        out = fn(storage, slots)
        # d = -0.5: G_t = r_{t+1} - 0.5 r_{t+2} + 0.25 r_{t+3} - 0.125 v*_{t+3}, bootstrap iff t + 3 < 4.
        #   G_0 = 0.5 - 0 + 0.5 - 0.125 * 0.4 = 0.95; G_1 = 0 - 1 + 0.25 = -0.75; G_2 = 2 - 0.5 = 1.5;
        #   G_3 = 1; G_4 = 0.
        np.testing.assert_allclose(out.partial_return, [[1.0, -0.75], [-0.75, 1.5], [1.5, 1], [1, 0], [0, 0]])
        np.testing.assert_allclose(out.bootstrap_discount[:, 0], [-0.125, 0, 0, 0, 0])
        np.testing.assert_allclose(out.bootstrap_value[:, 0], [0.4, 0, 0, 0, 0])
        np.testing.assert_allclose(n_step_returns(out)[:, 0], [0.95, -0.75, 1.5, 1, 0], rtol=1e-6)

    # Jitted only: eager dispatch compiles every op for these new shapes (~5 s) and the
    # maths is the code the un-jitted tests above already run.
    @chex.variants(with_jit=True)
    def test_target_network_bootstrap_obs(self):
        storage, slots = _one_player()
        config = TargetConfig(history_length=1, num_unroll_steps=2, td_steps=1, discount=1.0,
                              bootstrap_from="target_network")
        self.assertIs(config.bootstrap_from, BootstrapSource.TARGET_NETWORK)
        fn = self.variant(functools.partial(make_targets, config=config, num_actions=A1, discount_sign=1.0))
        out = fn(storage, slots)
        self.assertEqual(out.bootstrap_stacked_obs.shape, (4, 3, 1, 1, 1 + A1))
        # bootstrap_stacked_obs[t, k] is the history input at t + k + 1: o_{t+k+1} and a_{t+k};
        # past the end a zero frame and the dummy action.
        inputs = np.asarray(out.stacked_obs)  # history input at 0..3
        absorbing = np.array([0, 1 / 3, 0, 0]).reshape(1, 1, 4)
        expect = [[inputs[1], inputs[2], inputs[3]], [inputs[2], inputs[3], absorbing],
                  [inputs[3], absorbing, absorbing], [absorbing, absorbing, absorbing]]
        np.testing.assert_allclose(out.bootstrap_stacked_obs, np.array(expect), rtol=1e-6)
        # N = 1 bootstraps from v*_{t+k+1} only while t + k + 1 < 3.
        np.testing.assert_allclose(out.bootstrap_discount, [[1, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]])
        np.testing.assert_allclose(out.bootstrap_value, [[20, 30, 0], [30, 0, 0], [0, 0, 0], [0, 0, 0]])


def test_trajectory_value_difference_matches_make_targets():
    storage, slots = _one_player()
    config = TargetConfig(history_length=2, num_unroll_steps=2, td_steps=2, discount=0.5)
    delta = trajectory_value_difference(REW1, VAL1, config=config, discount_sign=1.0)
    # |v*_t - G_t| with G = [9.5, 3.5, 3, 0].
    np.testing.assert_allclose(delta, [0.5, 16.5, 27.0, 40.0])
    out = make_targets(storage, slots, config=config, num_actions=A1, discount_sign=1.0)
    np.testing.assert_allclose(delta, np.abs(out.root_values[:, 0] - n_step_returns(out)[:, 0]))


def test_monte_carlo_return_when_n_exceeds_the_episode():
    config = TargetConfig(history_length=1, num_unroll_steps=0, td_steps=50, discount=1.0)
    delta = trajectory_value_difference([0.0, 0.0, 0.0, 1.0], [0.5, -0.5, 0.5, 0.0], config=config,
                                        discount_sign=-1.0)
    # Two players, gamma = 1: G_t = (-1)^(3-t-1) * 1 -> G = [1, -1, 1, 0].
    np.testing.assert_allclose(delta, [0.5, 0.5, 0.5, 0.0])


@pytest.mark.parametrize("bad", [{"history_length": 0}, {"td_steps": 0}, {"num_unroll_steps": -1},
                                 {"discount": 1.5}, {"bootstrap_from": "oracle"}])
def test_config_rejects_bad_values(bad):
    with pytest.raises(MooziError):
        TargetConfig(**bad)


# Backgammon-like turns: player 0 moves twice, player 1 twice, player 0 once and wins (+1 to the
# mover); pgx leaves the winner to play at the end. gamma = 1, Monte-Carlo returns.
TURNS_TO_PLAY = np.array([0, 0, 1, 1, 0, 0])
TURNS_REWARD = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
# From each step's player to move: player 0 won, player 1 lost; the terminal state is worth 0.
TURNS_RETURNS = np.array([1.0, 1.0, -1.0, -1.0, 1.0, 0.0])


def test_per_step_signs_follow_who_moves_next():
    config = TargetConfig(history_length=1, num_unroll_steps=0, td_steps=50, discount=1.0)
    delta = trajectory_value_difference(TURNS_REWARD, TURNS_RETURNS, config=config, discount_sign=-1.0,
                                        to_play=TURNS_TO_PLAY)
    np.testing.assert_allclose(delta, np.zeros(6))
    # The constant sign of alternating games gets every step of the same turn wrong: (-1)^(4 - t).
    alternating = trajectory_value_difference(TURNS_REWARD, TURNS_RETURNS, config=config, discount_sign=-1.0)
    np.testing.assert_allclose(alternating, [0, 2, 2, 0, 0, 0])


def test_per_step_signs_bootstrap_by_hand():
    # N = 2, gamma = 0.5, values v*: G_t = r_{t+1} + 0.5 s_t r_{t+2} + 0.25 s_t s_{t+1} v*_{t+2}.
    config = TargetConfig(history_length=1, num_unroll_steps=0, td_steps=2, discount=0.5)
    reward = np.array([0.0, 1.0, 2.0, 4.0, 8.0])
    value = np.array([16.0, 32.0, 64.0, 128.0, 0.0])
    to_play = np.array([0, 0, 1, 1, 0])  # s = [+1, -1, +1, -1]
    expected = np.array([
        1.0 + 0.5 * 2.0 - 0.25 * 64.0,  # s_0 = +1, s_0 s_1 = -1
        2.0 - 0.5 * 4.0 - 0.25 * 128.0,  # s_1 = -1, s_1 s_2 = -1
        4.0 + 0.5 * 8.0,  # v*_4 is terminal
        8.0,
        0.0,
    ])
    delta = trajectory_value_difference(reward, value, config=config, discount_sign=-1.0, to_play=to_play)
    np.testing.assert_allclose(delta, np.abs(value - expected))


def test_all_turns_passing_is_the_constant_sign():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(4, 9)).astype(np.float32)  # J = 4 targets, N = 6
    values = rng.normal(size=(4, 4)).astype(np.float32)
    valid = rng.random((4, 4)) < 0.7
    constant = n_step_return_parts(rewards, values, valid, td_steps=6, discount=0.9, discount_sign=-1.0, xp=np)
    per_step = n_step_return_parts(rewards, values, valid, td_steps=6, discount=0.9, discount_sign=-1.0, xp=np,
                                   turn_signs=-np.ones((4, 9), np.float32))
    for a, b in zip(constant, per_step):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
