"""Acting: history stacking + initial inference + search in one jitted call."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.helpers.table_network import BANDIT_REWARDS, TableNetwork, table_variables

from moozi.core.acting import ActingOutput, make_muzero_act
from moozi.core.planner import PlannerConfig, make_muzero_model, make_planner
from moozi.envs.base import EnvSpec, StepOutput
from moozi.core.history import history_input, init_history, push_history

SPEC = EnvSpec(name="fake:bandit", obs_shape=(2, 2, 1), num_actions=5, num_players=1)
BATCH, HISTORY = 4, 2
CONFIG = PlannerConfig(num_simulations=32, temperature=0.0, dirichlet_fraction=0.0)


def variables():
    reward = np.zeros((2, SPEC.num_actions), np.float32)
    reward[0] = BANDIT_REWARDS
    # obs_weight makes the root value the mean of the stacked input, so we can see what the network got.
    return table_variables(next_state=np.ones((2, SPEC.num_actions)), reward=reward, value=np.zeros(2), obs_weight=1.0)


@functools.lru_cache(maxsize=None)
def act_fn():
    return jax.jit(make_muzero_act(TableNetwork(), CONFIG, SPEC, HISTORY))


def step(obs_value, is_first, is_last):
    is_last = np.asarray(is_last, bool)
    legal = np.ones((BATCH, SPEC.num_actions), bool)
    legal[:, 0] = False
    legal[is_last] = np.eye(SPEC.num_actions, dtype=bool)[0]  # only the dummy after the end
    return StepOutput(
        obs=np.broadcast_to(np.asarray(obs_value, np.float32)[:, None, None, None], (BATCH, *SPEC.obs_shape)).copy(),
        is_first=np.asarray(is_first, bool),
        is_last=is_last,
        reward=np.zeros(BATCH, np.float32),
        legal_actions=legal,
        to_play=np.full(BATCH, -1, np.int32),
    )


@pytest.mark.slow
def test_act_shapes_history_and_terminal():
    act = act_fn()
    history = init_history(BATCH, HISTORY, SPEC.obs_shape)
    first = step([1.0, 2.0, 3.0, 4.0], is_first=[True] * 4, is_last=[False] * 4)
    history, out = act(variables(), history, first, jnp.array([2, 2, 2, 2]), None, jax.random.PRNGKey(0))
    assert isinstance(out, ActingOutput)
    assert out.action.shape == (BATCH,) and out.action.dtype == jnp.int32
    assert out.root_value.shape == (BATCH,)
    assert out.action_probs.shape == (BATCH, SPEC.num_actions)
    assert all(leaf.shape == (BATCH,) for leaf in out.stats)
    np.testing.assert_array_equal(out.action, [3] * BATCH)  # the bandit's best arm
    np.testing.assert_array_equal(history.actions, np.zeros((BATCH, HISTORY)))  # a reset ignores last_action
    np.testing.assert_array_equal(history.frames[:, -1, 0, 0, 0], [1, 2, 3, 4])
    np.testing.assert_array_equal(history.frames[:, 0], 0.0)

    # Second step: row 1 ends its episode, row 2 starts a new one.
    second = step([5.0, 6.0, 7.0, 8.0], is_first=[False, False, True, False], is_last=[False, True, False, False])
    last_action = out.action
    history, out = act(variables(), history, second, last_action, None, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(history.actions[:, -1], [3, 3, 0, 3])
    np.testing.assert_array_equal(history.frames[:, -1, 0, 0, 0], [5, 6, 7, 8])
    np.testing.assert_array_equal(history.frames[:, 0, 0, 0, 0], [1, 2, 0, 4])
    np.testing.assert_array_equal(out.action, [3, 0, 3, 3])
    np.testing.assert_array_equal(out.action_probs[1], np.eye(SPEC.num_actions)[0])
    np.testing.assert_array_equal(out.stats.chosen_q[1], 0.0)


@pytest.mark.slow
def test_act_equals_planner_on_the_stacked_input():
    act = act_fn()
    history = init_history(BATCH, HISTORY, SPEC.obs_shape)
    history = push_history(history, step([1.0, 0.5, 0.0, 2.0], [True] * 4, [False] * 4).obs, jnp.ones(BATCH, bool), 0)
    current = step([3.0, 1.0, 4.0, 1.0], [False] * 4, [False] * 4)
    last_action = jnp.array([1, 2, 3, 4])
    rng = jax.random.PRNGKey(7)
    new_history, out = act(variables(), history, current, last_action, None, rng)

    expected_history = push_history(history, current.obs, current.is_first, last_action)
    stacked = history_input(expected_history, SPEC.num_actions)
    planner = jax.jit(make_planner(CONFIG, make_muzero_model(TableNetwork(), CONFIG.discount)))
    expected = planner(variables(), rng, stacked, current.legal_actions)

    jax.tree_util.tree_map(np.testing.assert_array_equal, new_history, expected_history)
    np.testing.assert_array_equal(out.action, expected.action)
    np.testing.assert_array_equal(out.root_value, expected.root_value)
    np.testing.assert_array_equal(out.action_probs, expected.action_probs)
    # The network saw the stacked history: its root value is the input's mean (obs_weight = 1).
    np.testing.assert_allclose(out.stats.raw_root_value, stacked.reshape(BATCH, -1).mean(-1), rtol=1e-6)


def test_act_rejects_wrong_history_length():
    history = init_history(BATCH, HISTORY + 1, SPEC.obs_shape)
    with pytest.raises(ValueError, match="history_state"):
        act_fn()(variables(), history, step([0.0] * 4, [True] * 4, [False] * 4), jnp.zeros(BATCH, jnp.int32),
                 None, jax.random.PRNGKey(0))
