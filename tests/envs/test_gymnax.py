"""The gymnax bridge: conformance, exact episode end/reset semantics, sticky actions, truncation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.envs.testing import check_jax_env
from moozi.envs import gymnax as gymnax_bridge
from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT, JaxEnv
from moozi.errors import MooziError, UnknownGameError, UnsupportedGameError

NOOP = 1  # augmented index of library action 0


@pytest.fixture(scope="module")
def breakout():
    # No sticky actions: the episode below is scripted exactly.
    return gymnax_bridge.make("gymnax:Breakout-MinAtar", sticky_action_prob=0.0)


@pytest.fixture(scope="module")
def breakout_step(breakout):
    return jax.jit(breakout.step)


def test_spec(breakout):
    assert isinstance(breakout, JaxEnv)
    spec = breakout.spec
    assert spec.name == "gymnax:Breakout-MinAtar"
    assert spec.obs_shape == (10, 10, 4)
    assert spec.num_actions == 4  # minimal set n, l, r + dummy
    assert spec.num_players == 1 and spec.binary_obs and spec.max_episode_steps == 1000


@pytest.mark.slow
def test_conformance_breakout():
    check_jax_env(gymnax_bridge.make("gymnax:Breakout-MinAtar"), seed=0, num_steps=100)


def test_conformance_cartpole_vector_obs():
    env = gymnax_bridge.make("gymnax:CartPole-v1")
    assert env.spec.obs_shape == (1, 1, 4) and env.spec.num_actions == 3 and not env.spec.binary_obs
    assert env.sticky_action_prob == 0.0  # sticky actions default on for MinAtar only
    check_jax_env(env, seed=0, num_steps=30)


def test_breakout_episode_end_and_reset_are_exact(breakout, breakout_step):
    """Compare against gymnax's own non-resetting functions driven by the same keys."""
    import gymnax

    env, params = gymnax.make("Breakout-MinAtar")
    key = jax.random.PRNGKey(0)
    state, out = breakout.init(key)
    ref_obs, ref_state = env.reset_env(key, params)
    np.testing.assert_array_equal(np.asarray(out.obs), np.asarray(ref_obs))
    ref_step = jax.jit(env.step_env)

    rewards, t = [], 0
    while not bool(out.is_last):
        t += 1
        step_key = jax.random.fold_in(key, t)
        state, out = breakout_step(state, jnp.int32(NOOP), jnp.bool_(False), step_key)
        # The bridge splits its key as (reset, step, sticky).
        _, gym_key, _ = jax.random.split(step_key, 3)
        ref_obs, ref_state, ref_reward, ref_done, _ = ref_step(gym_key, ref_state, 0, params)
        np.testing.assert_array_equal(np.asarray(out.obs), np.asarray(ref_obs), err_msg=f"step {t}")
        assert float(out.reward) == float(ref_reward) and bool(out.is_last) == bool(ref_done), t
        assert not bool(out.is_first)
        rewards.append(float(out.reward))
        assert t < 1000
    # The terminal step: its own (pre-reset) frame with the ball past the paddle, not a new episode's frame.
    assert bool(ref_state.terminal) and int(state.env_state.time) == t
    np.testing.assert_array_equal(np.asarray(out.legal_actions), [True, False, False, False])
    # The next call, is_last=True, starts a new episode whatever the action.
    reset_key = jax.random.PRNGKey(5)
    new_state, first = breakout_step(state, jnp.int32(3), jnp.bool_(True), reset_key)
    want_obs, _ = env.reset_env(jax.random.split(reset_key)[0], params)
    assert bool(first.is_first) and not bool(first.is_last) and float(first.reward) == 0.0
    np.testing.assert_array_equal(np.asarray(first.obs), np.asarray(want_obs))
    assert int(new_state.env_state.time) == 0 and int(new_state.last_action) == 0
    np.testing.assert_array_equal(np.asarray(first.legal_actions), [False, True, True, True])
    assert int(first.to_play) == SINGLE_AGENT


def test_truncation_is_last():
    env = gymnax_bridge.make("gymnax:CartPole-v1", max_steps_in_episode=3)
    assert env.spec.max_episode_steps == 3
    step = jax.jit(env.step)
    state, out = env.init(jax.random.PRNGKey(0))
    flags = []
    for t in range(4):
        was_last = out.is_last
        state, out = step(state, jnp.int32(1 + t % 2), was_last, jax.random.PRNGKey(t))
        flags.append((bool(out.is_first), bool(out.is_last)))
    # Three steps of a balanced pole, the third truncated, then a reset.
    assert flags == [(False, False), (False, False), (False, True), (True, False)]


def test_sticky_actions_repeat_the_previous_action():
    always = gymnax_bridge.make("gymnax:Breakout-MinAtar", sticky_action_prob=1.0)
    state, _ = always.init(jax.random.PRNGKey(0))
    state, _ = always.step(state, jnp.int32(3), jnp.bool_(False), jax.random.PRNGKey(1))
    # With probability 1 the NOOP executed after reset repeats forever.
    assert int(state.last_action) == 0
    never = gymnax_bridge.make("gymnax:Breakout-MinAtar", sticky_action_prob=0.0)
    state, _ = never.init(jax.random.PRNGKey(0))
    state, _ = never.step(state, jnp.int32(3), jnp.bool_(False), jax.random.PRNGKey(1))
    assert int(state.last_action) == 2  # augmented 3 = library action 2 ("r")
    assert gymnax_bridge.make("gymnax:Breakout-MinAtar").sticky_action_prob == 0.1


@pytest.mark.parametrize("illegal", [DUMMY_ACTION, 4], ids=["dummy", "past_end"])
def test_illegal_action_ends_episode_with_penalty(breakout, breakout_step, illegal):
    state, first = breakout.init(jax.random.PRNGKey(0))
    new_state, out = breakout_step(state, jnp.int32(illegal), jnp.bool_(False), jax.random.PRNGKey(1))
    assert bool(out.is_last) and float(out.reward) == gymnax_bridge.ILLEGAL_ACTION_REWARD == -1.0
    np.testing.assert_array_equal(np.asarray(out.obs), np.asarray(first.obs))
    assert int(new_state.env_state.time) == 0


def test_errors_and_known_games():
    with pytest.raises(UnknownGameError, match="gymnax:Breakout-MinAtar"):
        gymnax_bridge.make("gymnax:breakout-minatar")
    with pytest.raises(UnsupportedGameError, match="continuous"):
        gymnax_bridge.make("gymnax:Pendulum-v1")
    with pytest.raises(MooziError, match="sticky_action_prob"):
        gymnax_bridge.make("gymnax:CartPole-v1", sticky_action_prob=1.5)
    with pytest.raises(MooziError, match="bad option"):
        gymnax_bridge.make("gymnax:CartPole-v1", no_such_option=1)
    games = gymnax_bridge.known_games()
    assert "gymnax:Breakout-MinAtar" in games and "gymnax:CartPole-v1" in games
