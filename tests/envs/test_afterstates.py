"""The exact split of pgx's 2048 step into afterstate and chance outcome (moozi/envs/afterstates.py).

The split reuses pgx internals (`play2048._slide_and_merge`, `_legal_action_mask`, the board's
turning, `Env._step_with_illegal_action`); these tests pin them: for many states and every action,
each next state that the bridge's `step` draws under a key is exactly (every field of pgx's state and
of the step output) the outcome of one possible code, every possible code is drawn by some key, the
draws' frequencies follow the split's probabilities, and the probabilities sum to 1.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.envs import pgx as pgx_bridge
from moozi.envs.afterstates import EXACT_CHANCE_GAMES, chance_rules_of

NUM_KEYS = 4096  # per (state, action): the rarest outcome (a 4 on one of 15 empty cells) is drawn ~27 times


@pytest.fixture(scope="module")
def env():
    return pgx_bridge.make("pgx:2048")


def _leaves_equal(a, b):
    """Whether two pytrees of the same structure are equal in every leaf (unbatched)."""
    flags = [jnp.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))]
    return jnp.all(jnp.stack(flags))


def _random_states(env, games: int, steps: int, seed: int):
    """Every state of `games` random games of `steps` moves ([games * steps] states): pgx's terminal
    states repeat once reached (their mask is all True, and a move there changes nothing)."""

    def play(key):
        state, _ = env.init(key)

        def one(state, key):
            move_key, step_key = jax.random.split(key)
            legal = state.legal_action_mask
            lib_action = jax.random.choice(move_key, 4, p=legal / legal.sum())
            state, _ = env.step(state, lib_action + 1, jnp.bool_(False), step_key)
            return state, state

        _, states = jax.lax.scan(one, state, jax.random.split(key, steps))
        return states

    states = jax.jit(jax.vmap(play))(jax.random.split(jax.random.PRNGKey(seed), games))
    return jax.tree.map(lambda x: x.reshape(games * steps, *x.shape[2:]), states)


def _board_state(env, board):
    """A pgx 2048 state with `board` (16 exponents) as its position."""
    from pgx import play2048

    state, _ = env.init(jax.random.PRNGKey(0))
    board = jnp.asarray(board, jnp.int32)
    legal = play2048._legal_action_mask(board.reshape((4, 4)))
    state = state.replace(_board=board, legal_action_mask=legal, terminated=~legal.any())
    return state.replace(observation=env._env.observe(state))


def _check(env, states, actions):
    """For each state [S] and each action: the split against `step` under NUM_KEYS keys."""
    rules = env.chance_rules
    codes = jnp.arange(rules.num_chance_outcomes)
    keys = jax.random.split(jax.random.PRNGKey(11), NUM_KEYS)

    def per_action(state, action):
        after = rules.afterstate(state, action)
        logits = rules.chance_logits(after)
        outcomes = jax.vmap(rules.outcome, in_axes=(None, 0))(after, codes)  # [C]
        drawn = jax.vmap(env.step, in_axes=(None, None, None, 0))(state, action, jnp.bool_(False), keys)  # [K]
        match = jax.vmap(lambda d: jax.vmap(lambda o: _leaves_equal(d, o))(outcomes))(drawn)  # [K, C]
        possible = logits > -jnp.inf
        return dict(
            every_draw_is_a_possible_outcome=jnp.all(jnp.any(match & possible, axis=-1)),
            every_possible_outcome_is_drawn=jnp.all(jnp.any(match, axis=0) | ~possible),
            # For 2048 distinct possible codes are distinct states, so each draw matches one code.
            frequency=jnp.sum(match & possible, axis=0) / NUM_KEYS,
            probability=jax.nn.softmax(logits),
            total=jnp.exp(jax.scipy.special.logsumexp(logits)),
            reward_of_afterstate_is_the_step_reward=jnp.all(outcomes[1].reward == after.reward),
            finite=jnp.all(jnp.isfinite(jax.nn.softmax(logits))),
            illegal=after.illegal,
            ended=after.ended,
            empty=jnp.sum(after.state._board == 0),
        )

    per_state = jax.vmap(per_action, in_axes=(None, 0))
    out = jax.jit(lambda s: jax.lax.map(lambda one: per_state(one, actions), s))(states)
    return jax.tree.map(np.asarray, out)


def _assert_exact(out):
    for name in ("every_draw_is_a_possible_outcome", "every_possible_outcome_is_drawn",
                 "reward_of_afterstate_is_the_step_reward", "finite"):
        assert out[name].all(), name
    np.testing.assert_allclose(out["total"], 1.0, atol=1e-5)
    np.testing.assert_allclose(out["probability"].sum(-1), 1.0, atol=1e-5)
    # Each code's share of the draws: within 6 binomial standard deviations of its probability.
    p = out["probability"]
    sd = np.sqrt(p * (1 - p) / NUM_KEYS)
    assert np.all(np.abs(out["frequency"] - p) <= 6 * sd + 1e-6)


def test_2048_has_the_split_and_other_games_have_none(env):
    assert "pgx:2048" in EXACT_CHANCE_GAMES
    assert chance_rules_of(env) is env.chance_rules and env.chance_rules.num_chance_outcomes == 32
    assert chance_rules_of(pgx_bridge.make("pgx:tic_tac_toe")) is None


@pytest.mark.slow  # ~1.6M pgx steps compared leaf by leaf
def test_2048_split_reproduces_step_exactly(env):
    states = _random_states(env, games=4, steps=400, seed=0)  # openings to the end of each game
    picks = np.concatenate([np.arange(0, 1600, 41), np.flatnonzero(np.asarray(states.terminated))[:4]])
    states = jax.tree.map(lambda x: x[picks], states)
    assert np.asarray(states.terminated).any() and not np.asarray(states.terminated).all()
    actions = jnp.arange(6)  # the dummy, the four moves and one index out of range
    out = _check(env, states, actions)
    _assert_exact(out)
    # The states cover legal and illegal moves and the game's end.
    assert out["illegal"].any() and (~out["illegal"]).any() and out["ended"].any()
    assert out["empty"][~out["ended"]].min() <= 2 and out["empty"].max() >= 13


@pytest.mark.slow
def test_2048_split_of_an_illegal_move_on_a_full_board(env):
    # No empty cell; the bottom row merges (left and right are legal), no column does (up and down
    # are illegal). pgx's step still draws a tile, which lands on cell 0, and ends the game with -1.
    board = [1, 2, 1, 2,
             2, 1, 2, 1,
             1, 2, 1, 2,
             3, 3, 4, 5]
    state = _board_state(env, board)
    assert np.asarray(state.legal_action_mask).tolist() == [True, False, True, False]
    states = jax.tree.map(lambda x: x[None], state)
    out = _check(env, states, jnp.arange(5))
    _assert_exact(out)
    assert out["illegal"][0].tolist() == [True, False, True, False, True]  # the dummy, left, up, right, down
    p_up = out["probability"][0, 2]
    assert p_up[0] == pytest.approx(0.9) and p_up[1] == pytest.approx(0.1)  # cell 0: a 2 or a 4
    after = env.chance_rules.afterstate(state, jnp.int32(2))
    next_state, step = env.chance_rules.outcome(after, jnp.int32(0))
    assert bool(step.is_last) and float(step.reward) == -1.0 and int(next_state._board[0]) == 1


@pytest.mark.slow
def test_2048_split_of_a_known_move(env):
    # [2 2 4 0] slid left is [4 4 0 0] for a reward of 4; the other rows are empty.
    state = _board_state(env, [1, 1, 2, 0] + [0] * 12)
    after = env.chance_rules.afterstate(state, jnp.int32(1))  # bridge action 1: pgx's 0, left
    assert np.asarray(after.state._board).tolist() == [2, 2, 0, 0] + [0] * 12
    assert float(after.reward) == 4.0 and not bool(after.illegal)
    probs = np.asarray(jax.nn.softmax(env.chance_rules.chance_logits(after)))
    assert probs[0] == 0 and probs[1] == 0  # cell 0 holds a tile
    assert probs[4] == pytest.approx(0.9 / 14) and probs[5] == pytest.approx(0.1 / 14)  # cell 2 is empty
    assert np.isneginf(np.asarray(env.chance_rules.chance_logits(after))[:4]).all()
    next_state, step = env.chance_rules.outcome(after, jnp.int32(2 * 15 + 1))  # a 4 on cell 15
    assert int(next_state._board[15]) == 2 and float(step.reward) == 4.0 and not bool(step.is_last)


def test_2048_split_clips_codes_and_actions(env):
    state = _board_state(env, [1, 1, 2, 0] + [0] * 12)
    after = env.chance_rules.afterstate(state, jnp.int32(99))  # out of range: illegal, like step
    assert bool(after.illegal)
    _, step = env.chance_rules.outcome(after, jnp.int32(-7))  # clipped to code 0
    assert bool(step.is_last) and float(step.reward) == -1.0
    _, step = env.chance_rules.outcome(after, jnp.int32(500))
    assert np.isfinite(np.asarray(step.obs)).all()
