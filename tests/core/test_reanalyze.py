"""Reanalyze: a re-search over stored trajectories that replaces only p* and v*."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.helpers.table_network import TableNetwork, table_variables

from moozi.core.planner import PlannerConfig, SearchPolicy, reanalyze_planner_config
from moozi.core.reanalyze import (
    bucket_size,
    history_windows,
    make_reanalyze_fn,
    make_reanalyze_trajectory_fn,
)
from moozi.core.types import Trajectory
from moozi.envs.base import EnvSpec
from moozi.core.history import history_input, init_history, push_history

SPEC = EnvSpec(name="fake:chain", obs_shape=(2, 2, 1), num_actions=4, num_players=1, binary_obs=True)
HISTORY = 3
CONFIG = PlannerConfig(num_simulations=6, dirichlet_fraction=0.25)


def variables():
    # Every recurrent step has reward 0 and value 0, so each simulation backs up 0 and the search
    # value is exactly raw_root_value / (N + 1), with raw_root_value = mean(stacked input).
    zeros = np.zeros((2, SPEC.num_actions), np.float32)
    return table_variables(next_state=np.ones((2, SPEC.num_actions)), reward=zeros, value=np.zeros(2), obs_weight=1.0)


def make_trajectory(num_steps, seed=0):
    rng = np.random.default_rng(seed)
    num_actions = SPEC.num_actions
    legal = rng.random((num_steps, num_actions)) < 0.6
    legal[:, 0] = False
    legal[np.arange(num_steps), rng.integers(1, num_actions, num_steps)] = True
    legal[-1] = np.eye(num_actions, dtype=bool)[0]  # only the dummy after the end
    action = np.array([rng.choice(np.flatnonzero(row)) for row in legal], np.int32)
    probs = rng.random((num_steps, num_actions)).astype(np.float32)
    return Trajectory(
        obs=(rng.random((num_steps, *SPEC.obs_shape)) < 0.5).astype(np.uint8),  # stored compactly (binary obs)
        action=action,
        reward=rng.normal(size=num_steps).astype(np.float32),
        is_first=np.arange(num_steps) == 0,
        is_last=np.arange(num_steps) == num_steps - 1,
        legal_actions=legal,
        to_play=np.full(num_steps, -1, np.int32),
        root_value=rng.normal(size=num_steps).astype(np.float32),
        action_probs=probs / probs.sum(-1, keepdims=True),
    )


def acting_history_inputs(trajectory):
    """What acting's push_history + history_input feed the network at each step of the episode."""
    state = init_history(1, HISTORY, SPEC.obs_shape)
    inputs = []
    last_action = 0
    for t in range(len(trajectory.action)):
        state = push_history(state, trajectory.obs[t][None], trajectory.is_first[t][None], jnp.array([last_action]))
        inputs.append(history_input(state, SPEC.num_actions)[0])
        last_action = trajectory.action[t]
    return jnp.stack(inputs)


@functools.lru_cache(maxsize=None)
def reanalyze_trajectory_fn(max_batch=16, min_bucket=8):
    return make_reanalyze_trajectory_fn(
        TableNetwork(), CONFIG, SPEC, HISTORY, max_batch=max_batch, min_bucket=min_bucket
    )


def expected_root_value(trajectory):
    stacked = np.asarray(acting_history_inputs(trajectory))
    return stacked.reshape(len(stacked), -1).mean(-1) / (CONFIG.num_simulations + 1)


def test_history_windows_match_acting_history():
    trajectory = make_trajectory(6)
    windows = history_windows(trajectory.obs, trajectory.action, HISTORY, SPEC.num_actions)
    np.testing.assert_array_equal(windows, acting_history_inputs(trajectory))


@pytest.mark.parametrize("num_steps", [5, 40])  # one padded bucket; several chunks of max_batch
@pytest.mark.slow
def test_reanalyze_trajectory_replaces_only_search_statistics(num_steps):
    trajectory = make_trajectory(num_steps, seed=num_steps)
    new = reanalyze_trajectory_fn()(variables(), trajectory, jax.random.PRNGKey(0))
    assert isinstance(new, Trajectory)
    for field in Trajectory._fields:
        if field in ("root_value", "action_probs"):
            continue
        old_value, new_value = getattr(trajectory, field), getattr(new, field)
        assert new_value.dtype == old_value.dtype and new_value.shape == old_value.shape, field
        np.testing.assert_array_equal(new_value, old_value, err_msg=field)
    assert new.root_value.shape == (num_steps,) and new.root_value.dtype == np.float32
    assert new.action_probs.shape == (num_steps, SPEC.num_actions) and new.action_probs.dtype == np.float32
    np.testing.assert_allclose(new.root_value, expected_root_value(trajectory), rtol=1e-5)
    assert not np.allclose(new.action_probs, trajectory.action_probs)
    np.testing.assert_array_equal(new.action_probs[~trajectory.legal_actions], 0.0)
    np.testing.assert_allclose(new.action_probs.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(new.action_probs[-1], np.eye(SPEC.num_actions)[0])  # is_last: dummy only


def test_reanalyze_batch_matches_golden_value():
    trajectory = make_trajectory(5, seed=5)
    reanalyze_batch = make_reanalyze_fn(TableNetwork(), CONFIG, SPEC)
    stacked = acting_history_inputs(trajectory)
    root_value, action_probs = reanalyze_batch(
        variables(), stacked, jnp.asarray(trajectory.legal_actions), jax.random.PRNGKey(1)
    )
    np.testing.assert_allclose(root_value, expected_root_value(trajectory), rtol=1e-5)
    assert action_probs.shape == (5, SPEC.num_actions)
    np.testing.assert_array_equal(np.asarray(action_probs)[~trajectory.legal_actions], 0.0)


def test_reanalyze_config_drops_only_root_noise():
    config = reanalyze_planner_config(dataclasses.replace(CONFIG, search_policy=SearchPolicy.GUMBEL_MUZERO, temperature=0.5))
    assert config.dirichlet_fraction == 0.0
    assert config == dataclasses.replace(
        CONFIG, search_policy=SearchPolicy.GUMBEL_MUZERO, temperature=0.5, dirichlet_fraction=0.0
    )


@pytest.mark.parametrize(
    "num_steps, expected",
    [(1, 16), (5, 16), (16, 16), (17, 32), (100, 128), (256, 256), (257, 512), (600, 768)],
)
def test_bucket_size(num_steps, expected):
    assert bucket_size(num_steps, max_batch=256, min_bucket=16) == expected
