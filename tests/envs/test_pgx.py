"""The pgx bridge: conformance, exact rewards, illegal-action penalty, jit+vmap agreement."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.envs.testing import check_jax_env
from moozi.envs import pgx as pgx_bridge
from moozi.envs.base import DUMMY_ACTION, SINGLE_AGENT, JaxEnv
from moozi.errors import MooziError, UnknownGameError, UnsupportedGameError


@pytest.fixture(scope="module")
def ttt():
    return pgx_bridge.make("pgx:tic_tac_toe")


@pytest.fixture(scope="module")
def ttt_step(ttt):
    return jax.jit(ttt.step)


def _play(step, state, actions, key=jax.random.PRNGKey(7)):
    outs = []
    for a in actions:
        state, out = step(state, jnp.int32(a), jnp.bool_(False), key)
        outs.append(out)
    return state, outs


def test_spec(ttt):
    assert isinstance(ttt, JaxEnv)
    assert ttt.spec.name == "pgx:tic_tac_toe"
    assert ttt.spec.obs_shape == (3, 3, 2)
    assert ttt.spec.num_actions == 10  # 9 cells + dummy
    assert ttt.spec.num_players == 2
    assert ttt.spec.binary_obs


@pytest.mark.slow
def test_conformance_tic_tac_toe(ttt):
    check_jax_env(ttt, seed=0, num_steps=100)


@pytest.mark.slow
def test_conformance_single_player_minatar():
    env = pgx_bridge.make("pgx:minatar-breakout")
    assert env.spec.num_players == 1 and env.spec.obs_shape == (10, 10, 4) and env.spec.num_actions == 4
    _, out = env.init(jax.random.PRNGKey(0))
    assert int(out.to_play) == SINGLE_AGENT
    check_jax_env(env, seed=0, num_steps=30)


def test_scripted_win_rewards_the_winner_at_the_winning_step(ttt, ttt_step):
    state, first = ttt.init(jax.random.PRNGKey(0))
    x = int(first.to_play)  # pgx picks the first player at random
    # Cells (augmented index = cell + 1): X takes 0, 1, 2 (top row); O takes 3, 4.
    state, outs = _play(ttt_step, state, [1, 4, 2, 5, 3])
    np.testing.assert_array_equal([float(o.reward) for o in outs], [0.0, 0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal([bool(o.is_last) for o in outs], [False, False, False, False, True])
    np.testing.assert_array_equal([int(o.to_play) for o in outs[:4]], [1 - x, x, 1 - x, x])
    win = outs[-1]
    # Only the dummy is legal on the last step.
    np.testing.assert_array_equal(np.asarray(win.legal_actions), [True] + [False] * 9)
    # After the first move, cell 0 is gone from the mask and the dummy is illegal.
    np.testing.assert_array_equal(np.asarray(outs[0].legal_actions), [False, False] + [True] * 8)
    # Reset on is_last, whatever the action: a fresh empty board.
    _, out = ttt_step(state, jnp.int32(DUMMY_ACTION), jnp.bool_(True), jax.random.PRNGKey(3))
    assert bool(out.is_first) and not bool(out.is_last) and float(out.reward) == 0.0
    np.testing.assert_array_equal(np.asarray(out.obs), np.zeros((3, 3, 2), np.float32))


def test_obs_is_current_players_view(ttt, ttt_step):
    state, _ = ttt.init(jax.random.PRNGKey(0))
    _, (out,) = _play(ttt_step, state, [5])  # first player takes the centre (cell 4)
    expected = np.zeros((3, 3, 2), np.float32)
    expected[1, 1, 1] = 1.0  # plane 0: the mover's own marks, plane 1: the opponent's
    np.testing.assert_array_equal(np.asarray(out.obs), expected)
    assert out.obs.dtype == jnp.float32


@pytest.mark.parametrize("illegal", [1, DUMMY_ACTION, 10, -3], ids=["occupied", "dummy", "past_end", "negative"])
def test_illegal_actions_lose_by_pgx_rule(ttt, ttt_step, illegal):
    state, _ = ttt.init(jax.random.PRNGKey(0))
    state, (out,) = _play(ttt_step, state, [1])  # cell 0 is now occupied
    _, (out,) = _play(ttt_step, state, [illegal])
    # pgx ends the game and the mover gets -1 (the opponent +1); moozi reports the mover's reward.
    assert bool(out.is_last)
    assert float(out.reward) == -1.0
    np.testing.assert_array_equal(np.asarray(out.legal_actions), [True] + [False] * 9)


def test_jit_vmap_batch_of_8_equals_unbatched(ttt):
    keys = jax.random.split(jax.random.PRNGKey(1), 8)
    states, outs = jax.vmap(ttt.init)(keys)
    vstep = jax.jit(jax.vmap(ttt.step))
    rng = np.random.default_rng(0)
    singles = [ttt.init(k) for k in keys]
    step = jax.jit(ttt.step)
    resets = 0
    for t in range(12):  # long enough for some games to end and reset
        masks = np.asarray(outs.legal_actions)
        actions = jnp.asarray([rng.choice(np.flatnonzero(m)) for m in masks], jnp.int32)
        step_keys = jax.random.split(jax.random.PRNGKey(100 + t), 8)
        resets += int(np.asarray(outs.is_last).sum())
        states, outs = vstep(states, actions, outs.is_last, step_keys)
        singles = [step(s, actions[i], o.is_last, step_keys[i]) for i, (s, o) in enumerate(singles)]
        for i, (s, o) in enumerate(singles):
            for got, want in zip(jax.tree.leaves((states, outs)), jax.tree.leaves((s, o))):
                np.testing.assert_array_equal(np.asarray(got)[i], np.asarray(want), err_msg=f"row {i} step {t}")
    assert resets > 0, "the run should cover the reset branch"


def test_vector_observations_become_1x1xC():
    env = pgx_bridge.make("pgx:kuhn_poker")
    assert env.spec.obs_shape == (1, 1, 7) and env.spec.num_actions == 3
    _, out = env.init(jax.random.PRNGKey(0))
    assert out.obs.shape == (1, 1, 7) and out.obs.dtype == jnp.float32


def test_errors():
    with pytest.raises(UnknownGameError, match="pgx:tic_tac_toe"):
        pgx_bridge.make("pgx:tictactoe")
    with pytest.raises(UnsupportedGameError, match="3 players"):
        pgx_bridge.make("pgx:sparrow_mahjong")
    with pytest.raises(MooziError, match="sticky_action_prob"):
        pgx_bridge.make("pgx:tic_tac_toe", sticky_action_prob=0.0)


def test_minatar_sticky_option_and_known_games():
    env = pgx_bridge.make("pgx:minatar-breakout", sticky_action_prob=0.0)
    assert env._env.sticky_action_prob == 0.0
    games = pgx_bridge.known_games()
    assert "pgx:tic_tac_toe" in games and "pgx:go_9x9" in games and "pgx:sparrow_mahjong" not in games
