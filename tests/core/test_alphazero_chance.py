"""AlphaZero mode with chance nodes (moozi/core/alphazero_chance.py): the search over the real rules
expands chance outcomes with their true probabilities.

On a hand-made one-move chance game (tests/helpers/tiny_chance.py) with a network that knows nothing
(uniform prior, value 0), so that whatever is found the search found: the search with chance nodes
takes the move that is best in expectation, where AlphaZero mode's sampled search, which plans on
one draw per edge, is fooled on the rows whose draw was lucky (or unlucky). Then the model's edges
one by one (rewards on the chance edge, terminal states absorb, the inputs mctx passes to the other
kind of node), the search on pgx's 2048, and the config key through builders.py.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.config import ConfigError, build_config
from moozi.core.alphazero import PerfectModelRoot, make_alphazero_act
from moozi.core.alphazero_chance import make_alphazero_chance_act, make_perfect_chance_model
from moozi.core.history import init_history
from moozi.core.planner import PlannerConfig
from moozi.errors import MooziError
from tests.helpers.tiny_chance import GAMBLE, SAFE, TinyChanceEnv

BATCH = 16  # rows searched side by side: the sampled search draws each row's gamble apart


class _Prediction(NamedTuple):
    policy_logits: jax.Array
    value: jax.Array


class _Uninformed:
    """Uniform prior, value 0: the search alone decides."""

    def __init__(self, num_actions):
        self.num_actions = num_actions

    def initial_inference(self, params, stacked_obs):
        batch = stacked_obs.shape[0]
        return _Prediction(jnp.zeros((batch, self.num_actions)), jnp.zeros((batch,)))


def _planner(simulations, **extra):
    return PlannerConfig(num_simulations=simulations, dirichlet_fraction=0.0, temperature=0.0, discount=1.0, **extra)


def _roots(env, batch=BATCH):
    states, steps = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), batch))
    return states, steps, init_history(batch, 1, env.spec.obs_shape), jnp.zeros((batch,), jnp.int32)


def _act(make, env, planner, seed=1):
    act = jax.jit(make(env, _Uninformed(env.spec.num_actions), planner, env.spec))
    states, steps, history, last = _roots(env)
    _, out = act(None, history, steps, last, states, jax.random.PRNGKey(seed))
    return jax.tree.map(np.asarray, out)


# The gamble pays 0.3 · prize in expectation against the safe move's sure 1: 0.9 (safe is best) or 3
# (the gamble is best, though it loses 7 times in 10).
@pytest.mark.slow
@pytest.mark.parametrize(("prize", "best"), [(3.0, SAFE), (10.0, GAMBLE)])
def test_the_search_with_chance_nodes_takes_the_move_best_in_expectation(prize, best):
    env = TinyChanceEnv(safe=1.0, prize=prize, p_win=0.3)
    exact = _act(make_alphazero_chance_act, env, _planner(16))
    assert (exact.action == best).all()
    # The gamble's Q: its afterstate value 0.3 · prize, then its outcomes in proportion to their probabilities.
    assert exact.root.q[:, GAMBLE] == pytest.approx(np.full(BATCH, 0.3 * prize), abs=0.25 * prize)
    assert exact.root.q[:, SAFE] == pytest.approx(np.ones(BATCH))
    # One draw per edge: a row whose draw won sees the prize as certain (and one that lost, nothing).
    sampled = _act(make_alphazero_act, env, _planner(16))
    assert (sampled.action != best).any() and (sampled.action == best).any()
    assert set(np.unique(sampled.root.q[:, GAMBLE])) <= {0.0, prize}


@pytest.mark.slow
def test_the_parent_afterstate_value_learns_a_move_only_from_its_visited_outcomes():
    # Why "expected" is the default: from the parent's value (0 here) the gamble starts no better than
    # the safe move, its first outcomes are the likely losses, and PUCT keeps visiting the safe move.
    # At 16 simulations the search still plays safe; by 64 its Q has the gamble ahead, its visits not yet.
    env = TinyChanceEnv(safe=1.0, prize=10.0, p_win=0.3)
    few = _act(make_alphazero_chance_act, env, _planner(16, afterstate_value="parent"))
    assert (few.action == SAFE).all()
    more = _act(make_alphazero_chance_act, env, _planner(64, afterstate_value="parent"))
    assert (more.root.q[:, GAMBLE] > more.root.q[:, SAFE]).all()


def _model(env, afterstate_value="expected"):
    return make_perfect_chance_model(env.chance_rules, _Uninformed(env.spec.num_actions), 1.0, env.spec.num_actions,
                                     afterstate_value=afterstate_value)


def _root_embedding(env, model, batch=2):
    states, steps, history, _ = _roots(env, batch)
    root = PerfectModelRoot(states, history, steps.is_last, steps.to_play)
    return model.root(None, jax.random.PRNGKey(0), root).embedding


def test_the_step_reward_is_on_the_chance_edge_and_terminal_states_absorb():
    env = TinyChanceEnv(safe=1.0, prize=3.0, p_win=0.3)
    model = _model(env)
    embedding = _root_embedding(env, model)
    decision, after = model.decision(None, None, jnp.asarray([GAMBLE, SAFE]), embedding)
    np.testing.assert_allclose(jax.nn.softmax(decision.chance_logits), [[0.7, 0.3], [1.0, 0.0]], atol=1e-6)
    np.testing.assert_allclose(decision.afterstate_value, [0.9, 1.0], atol=1e-6)  # one expectimax step
    chance, child = model.chance(None, None, jnp.asarray([1, 0]), after)
    np.testing.assert_allclose(chance.reward, [3.0, 1.0])  # the gamble won; the safe move's sure reward
    np.testing.assert_allclose(chance.discount, [0.0, 0.0])  # into a terminal state
    assert bool(child.node.done.all())
    # Below the end: a certain outcome, no reward, value 0 and a uniform prior.
    decision, after = model.decision(None, None, jnp.asarray([GAMBLE, SAFE]), child)
    np.testing.assert_allclose(jax.nn.softmax(decision.chance_logits), [[1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(decision.afterstate_value, [0.0, 0.0])
    chance, _ = model.chance(None, None, jnp.asarray([0, 1]), after)
    np.testing.assert_allclose(chance.reward, [0.0, 0.0])
    np.testing.assert_allclose(chance.discount, [0.0, 0.0])
    np.testing.assert_allclose(chance.action_logits, 0.0)


@pytest.mark.parametrize("afterstate_value", ["expected", "parent"])
def test_each_kind_of_node_takes_the_other_kinds_input(afterstate_value):
    # mctx calls both functions on every expansion: a chance node's code c arrives as action A + c, and
    # a decision node's action a as code a - A; both must give finite outputs (which mctx then drops).
    env = TinyChanceEnv()
    model = _model(env, afterstate_value)
    embedding = _root_embedding(env, model)
    A = env.spec.num_actions
    decision, after = model.decision(None, None, jnp.asarray([A + 0, A + 1]), embedding)
    chance, _ = model.chance(None, None, jnp.asarray([0 - A, 2 - A]), after)
    for leaf in jax.tree.leaves((decision.afterstate_value, chance)):
        assert np.isfinite(np.asarray(leaf)).all()
    assert np.isfinite(np.asarray(jax.nn.softmax(decision.chance_logits))).all()


def test_an_illegal_move_ends_the_game_with_the_penalty():
    env = TinyChanceEnv()
    model = _model(env)
    embedding = _root_embedding(env, model)
    decision, after = model.decision(None, None, jnp.asarray([0, 0]), embedding)  # the dummy mid-game
    np.testing.assert_allclose(decision.afterstate_value, [-1.0, -1.0])
    chance, child = model.chance(None, None, jnp.asarray([0, 0]), after)
    np.testing.assert_allclose(chance.reward, [-1.0, -1.0])
    assert bool(child.node.done.all())


def test_an_unknown_afterstate_value_is_refused():
    env = TinyChanceEnv()
    with pytest.raises(MooziError, match="afterstate_value='mean'; allowed: expected, parent"):
        _model(env, "mean")


# ------------------------------------------------------------------------------------------- 2048


def _random_positions(env, batch, moves, seed=0):
    """`batch` positions after `moves` random legal moves (any JAX env)."""

    def play(key):
        state, step = env.init(key)

        def one(carry, key):
            state, step, _ = carry
            move_key, step_key = jax.random.split(key)
            action = jax.random.choice(move_key, env.spec.num_actions, p=step.legal_actions / step.legal_actions.sum())
            state, step = env.step(state, action, jnp.bool_(False), step_key)
            return (state, step, action), None

        (state, step, action), _ = jax.lax.scan(one, (state, step, jnp.int32(0)), jax.random.split(key, moves))
        return state, step, action

    return jax.jit(jax.vmap(play))(jax.random.split(jax.random.PRNGKey(seed), batch))


@pytest.mark.slow
def test_on_2048_each_edge_is_the_real_step():
    from moozi.envs.registry import make_env

    env = make_env("pgx:2048")
    model = _model(env)
    states, steps, _ = _random_positions(env, batch=4, moves=30)
    history = init_history(4, 1, env.spec.obs_shape)
    root = PerfectModelRoot(states, history, steps.is_last, steps.to_play)
    embedding = model.root(None, jax.random.PRNGKey(0), root).embedding
    action = jnp.argmax(steps.legal_actions, axis=-1)  # the first legal move of each position
    decision, after = jax.jit(model.decision)(None, None, action, embedding)
    logits = np.asarray(decision.chance_logits)
    assert (np.isneginf(logits) == (np.asarray(after.afterstate.state._board) != 0).repeat(2, axis=-1)).all()
    code = jnp.argmax(decision.chance_logits, axis=-1)
    chance, child = jax.jit(model.chance)(None, None, code, after)
    # The same step through the env, under keys that draw that outcome: found among many keys.
    keys = jax.random.split(jax.random.PRNGKey(5), 512)  # the likeliest outcome has p >= 0.9 / 15
    stepped, out = jax.vmap(lambda k: jax.vmap(env.step, in_axes=(0, 0, None, None))(states, action, jnp.bool_(False), k))(keys)
    same = (np.asarray(stepped._board) == np.asarray(child.node.env_state._board)[None]).all(-1)  # [K, B]
    assert same.any(0).all()
    k = same.argmax(0)
    np.testing.assert_array_equal(chance.reward, np.asarray(out.reward)[k, np.arange(4)])
    # The untrained network's value is 0: the afterstate value is the move's reward, exactly.
    np.testing.assert_allclose(decision.afterstate_value, chance.reward)


@pytest.mark.slow
def test_on_2048_the_search_runs_jitted_and_plays_legal_moves():
    from moozi.envs.registry import make_env

    env = make_env("pgx:2048")
    states, steps, last = _random_positions(env, batch=3, moves=60, seed=1)
    act = jax.jit(make_alphazero_chance_act(env, _Uninformed(env.spec.num_actions), _planner(12), env.spec))
    _, out = act(None, init_history(3, 1, env.spec.obs_shape), steps, last, states, jax.random.PRNGKey(2))
    legal = np.asarray(steps.legal_actions)
    assert legal[np.arange(3), np.asarray(out.action)].all()
    assert (np.asarray(out.action_probs)[~legal] == 0).all()
    assert np.isfinite(np.asarray(out.root_value)).all() and (np.asarray(out.stats.max_depth) >= 1).all()


# ------------------------------------------------------------------------------------- backgammon


class _Constant(_Uninformed):
    """Uniform prior, the same value everywhere (for the player to move): the signs show in the backups."""

    def initial_inference(self, params, stacked_obs):
        out = super().initial_inference(params, stacked_obs)
        return _Prediction(out.policy_logits, jnp.full_like(out.value, 0.5))


def _backgammon_model(env, network):
    A = env.spec.num_actions
    assert env.spec.per_step_turn_signs  # as make_alphazero_chance_act builds it for backgammon
    return make_perfect_chance_model(env.chance_rules, network, 1.0, A, per_step_signs=True)


@pytest.mark.slow
def test_on_backgammon_the_chance_edge_keeps_the_sign_within_a_turn_and_flips_it_where_the_turn_passes():
    from moozi.envs.afterstates import BACKGAMMON_ROLLS
    from moozi.envs.registry import make_env

    env = make_env("pgx:backgammon")
    model = _backgammon_model(env, _Constant(env.spec.num_actions))
    batch = 4
    states, steps = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), batch))
    root = PerfectModelRoot(states, init_history(batch, 1, env.spec.obs_shape), steps.is_last, steps.to_play)
    embedding = model.root(None, jax.random.PRNGKey(0), root).embedding
    decision, chance_fn = jax.jit(model.decision), jax.jit(model.chance)
    # The opening roll has two different dice: the first move leaves one to play, one certain outcome,
    # the same player again (+1), and the next position's value 0.5 backs up as +0.5.
    dec, after = decision(None, None, jnp.argmax(steps.legal_actions, axis=-1), embedding)
    probs = np.asarray(jax.nn.softmax(dec.chance_logits))
    assert (probs[:, 0] == 1.0).all()
    np.testing.assert_allclose(dec.afterstate_value, 0.5)
    out, child = chance_fn(None, None, jnp.zeros(batch, jnp.int32), after)
    np.testing.assert_allclose(out.discount, 1.0)
    np.testing.assert_allclose(out.reward, 0.0)
    np.testing.assert_array_equal(child.node.to_play, steps.to_play)
    # The second move (or the no-op where the die cannot move) ends the turn: 21 rolls with their true
    # probabilities, each edge into the opponent's turn signed -1, so the expectation is -0.5.
    legal = jax.vmap(env.chance_rules.outcome)(after.afterstate, jnp.zeros(batch, jnp.int32))[1].legal_actions
    dec, after = decision(None, None, jnp.argmax(legal, axis=-1), child)
    expected = np.asarray([(1.0 if a == b else 2.0) / 36 for a, b in BACKGAMMON_ROLLS])
    np.testing.assert_allclose(jax.nn.softmax(dec.chance_logits), np.broadcast_to(expected, (batch, 21)), atol=1e-6)
    np.testing.assert_allclose(dec.afterstate_value, -0.5, atol=1e-6)
    for code in (0, 5, 20):  # a double of ones, a one and a six, a double of sixes
        out, grandchild = chance_fn(None, None, jnp.full(batch, code, jnp.int32), after)
        np.testing.assert_allclose(out.discount, -1.0)
        np.testing.assert_array_equal(grandchild.node.to_play, 1 - np.asarray(steps.to_play))
        assert not bool(grandchild.node.done.any())


@pytest.mark.slow
def test_on_backgammon_a_win_carries_its_score_on_the_chance_edge():
    from pgx import backgammon as bg

    from moozi.envs.registry import make_env

    env = make_env("pgx:backgammon")
    # One checker left, on the mover's last point; the opponent has none off and all in the mover's home
    # board. Bearing it off with the one wins a backgammon: 3 points, before chance and on its edge.
    state, _ = env.init(jax.random.PRNGKey(0))
    board = jnp.zeros(28, jnp.int32).at[23].set(1).at[26].set(14).at[20].set(-15)
    dice = jnp.int32([0, 2])
    state = state.replace(_board=board, _dice=dice, _playable_dice=bg._set_playable_dice(dice),
                          legal_action_mask=bg._legal_action_mask(board, dice))
    state = state.replace(observation=env._env.observe(state))
    batch = 2
    states, steps = jax.tree.map(lambda x: jnp.stack([x] * batch), (state, env._output(state, 0.0, False)))
    model = _backgammon_model(env, _Constant(env.spec.num_actions))
    root = PerfectModelRoot(states, init_history(batch, 1, env.spec.obs_shape), steps.is_last, steps.to_play)
    embedding = model.root(None, jax.random.PRNGKey(0), root).embedding
    bear_off = 25 * 6 + 0 + 1  # point 23 is source 25 in pgx's numbering (0 the no-op, 1 the bar); +1: the dummy
    dec, after = model.decision(None, None, jnp.int32([bear_off, bear_off]), embedding)
    np.testing.assert_allclose(jax.nn.softmax(dec.chance_logits)[:, 0], 1.0)  # no roll after the game's end
    np.testing.assert_allclose(dec.afterstate_value, 3.0)  # the terminal state's value 0.5 is not counted
    out, child = model.chance(None, None, jnp.int32([0, 7]), after)
    np.testing.assert_allclose(out.reward, 3.0)
    np.testing.assert_allclose(out.discount, 0.0)
    assert bool(child.node.done.all())


@pytest.mark.slow
def test_on_backgammon_the_search_runs_jitted_and_plays_legal_moves():
    from moozi.envs.registry import make_env

    env = make_env("pgx:backgammon")
    states, steps, last = _random_positions(env, batch=3, moves=40, seed=1)
    act = jax.jit(make_alphazero_chance_act(env, _Constant(env.spec.num_actions), _planner(12), env.spec))
    _, out = act(None, init_history(3, 1, env.spec.obs_shape), steps, last, states, jax.random.PRNGKey(2))
    legal = np.asarray(steps.legal_actions)
    assert legal[np.arange(3), np.asarray(out.action)].all()
    assert (np.asarray(out.action_probs)[~legal] == 0).all()
    assert np.isfinite(np.asarray(out.root_value)).all() and (np.asarray(out.stats.max_depth) >= 1).all()


# ------------------------------------------------------------------------------------------ config


@pytest.mark.slow
def test_the_config_key_reaches_the_act_through_builders():
    from moozi.builders import build_network, env_spec, example_stacked_obs, make_acting
    from moozi.envs.registry import make_env

    overrides = {"agent": "alphazero", "planner.chance_search": "exact", "planner.num_simulations": 6,
                 "network.mlp_hidden_sizes": "16", "network.head_hidden": "16"}
    config = build_config("2048", overrides=overrides)
    assert config.game == "pgx:2048" and config.planner.chance_search == "exact"
    spec = env_spec(config)
    network = build_network(config, spec)
    params = network.init(jax.random.PRNGKey(0), example_stacked_obs(config, spec))
    env = make_env("pgx:2048")
    states, steps, last = _random_positions(env, batch=2, moves=5)
    act = make_acting(config, spec, config.planner)
    history = init_history(2, config.targets.history_length, spec.obs_shape)
    _, out = act(params, history, steps, last, states, jax.random.PRNGKey(3))
    assert out.stats.max_depth.shape == (2,) and np.asarray(steps.legal_actions)[np.arange(2), np.asarray(out.action)].all()
    # The preset itself is unchanged: 2048 trains Stochastic MuZero, and AlphaZero samples unless asked.
    assert build_config("2048").agent == "stochastic_muzero"
    assert build_config("2048", overrides={"agent": "alphazero"}).planner.chance_search == "sampled"


@pytest.mark.parametrize(
    ("game", "overrides", "message"),
    [
        ("2048", {"planner.chance_search": "exactly"},
         "bad value 'exactly' for planner.chance_search: expected one of 'sampled', 'exact'"),
        ("2048", {"planner.chance_search": "exact"}, "planner.chance_search='exact' is for agent=alphazero"),
        ("connect_four", {"agent": "alphazero", "planner.chance_search": "exact"},
         "needs a game whose chance outcomes the bridge gives exactly: pgx:2048, pgx:backgammon; 'pgx:connect_four' "
         "is not one"),
        ("2048", {"agent": "alphazero", "planner.chance_search": "exact", "planner.search_policy": "gumbel_muzero"},
         "planner.search_policy='gumbel_muzero' is not allowed with planner.chance_search='exact'"),
        ("2048", {"agent": "alphazero", "planner.afterstate_value": "mean"},
         "bad value 'mean' for planner.afterstate_value: expected one of 'expected', 'parent'"),
    ],
)
def test_the_config_refuses_what_it_cannot_search(game, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_config(game, overrides=overrides)


def test_the_planner_config_names_the_allowed_values():
    with pytest.raises(MooziError, match="planner.chance_search='x'; allowed: sampled, exact"):
        PlannerConfig(chance_search="x")
    with pytest.raises(MooziError, match="planner.afterstate_value='x'; allowed: expected, parent"):
        PlannerConfig(afterstate_value="x")
    assert dataclasses.replace(PlannerConfig(), chance_search="exact").chance_search == "exact"
