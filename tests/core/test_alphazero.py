"""AlphaZero mode: mctx search with pgx's rules as the model finds wins and blocks losses."""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.core.alphazero import PerfectModelRoot, make_alphazero_act, make_perfect_model
from moozi.core.planner import PlannerConfig
from moozi.envs.registry import make_env
from moozi.core.history import init_history


class _Prediction(NamedTuple):
    policy_logits: jax.Array
    value: jax.Array


class _Uninformed:
    """A network that knows nothing: uniform prior, value 0. Whatever the search finds, the rules found."""

    def __init__(self, num_actions):
        self.num_actions = num_actions

    def initial_inference(self, params, stacked_obs):
        batch = stacked_obs.shape[0]
        return _Prediction(jnp.zeros((batch, self.num_actions)), jnp.zeros((batch,)))


def _position(env, cells):
    """The pgx state and step after playing `cells` (0-8, row-major) from the start."""
    state, step = env.init(jax.random.PRNGKey(0))
    last = 0
    for cell in cells:
        state, step = env.step(state, jnp.int32(cell + 1), jnp.bool_(False), jax.random.PRNGKey(1))
        last = cell + 1
    return state, step, last


def _search(cells, policy):
    env = make_env("pgx:tic_tac_toe")
    spec = env.spec
    config = PlannerConfig(search_policy=policy, num_simulations=300, dirichlet_fraction=0.0, temperature=0.0,
                           gumbel_scale=0.0, max_num_considered_actions=9, discount=1.0)
    act = jax.jit(make_alphazero_act(env, _Uninformed(spec.num_actions), config, spec))
    state, step, last = _position(env, cells)
    batched_state = jax.tree.map(lambda x: x[None], state)
    batched_step = jax.tree.map(lambda x: jnp.asarray(x)[None], step)
    _, out = act(None, init_history(1, 1, spec.obs_shape), batched_step, jnp.asarray([last], jnp.int32),
                 batched_state, jax.random.PRNGKey(2))
    return int(out.action[0]) - 1, float(out.root_value[0]), np.asarray(out.action_probs[0])


@pytest.mark.parametrize("policy", ["muzero", "gumbel_muzero"])
@pytest.mark.slow
def test_finds_the_immediate_win(policy):
    # X: 0, 1; O: 3, 4. X to move: 2 wins at once (O threatens 5, which X need not block).
    cell, value, _ = _search([0, 3, 1, 4], policy)
    assert cell == 2
    # PUCT puts most visits on the win; Gumbel's sequential halving spreads them over the considered moves.
    assert value > (0.5 if policy == "muzero" else 0.0)


@pytest.mark.parametrize("policy", ["muzero", "gumbel_muzero"])
@pytest.mark.slow
def test_blocks_the_immediate_loss(policy):
    # X: 0, 8; O: 4, 2. O threatens 2-4-6; X has no win of its own, so X must take 6.
    cell, _, _ = _search([0, 4, 8, 2], policy)
    assert cell == 6


@pytest.mark.slow
def test_terminal_root_acts_dummy_and_illegal_moves_get_no_mass():
    # X wins with 0, 1, 2: the root is the terminal step, where only the dummy is legal.
    env = make_env("pgx:tic_tac_toe")
    _, step, _ = _position(env, [0, 3, 1, 4, 2])
    assert bool(step.is_last)
    cell, _, probs = _search([0, 3, 1, 4, 2], "muzero")
    assert cell == -1  # the dummy action 0
    assert probs[0] == pytest.approx(1.0)
    # Mid-game, occupied cells get no visits.
    _, _, probs = _search([0, 4], "muzero")
    assert probs[1] == 0 and probs[5] == 0  # cells 0 and 4


@pytest.mark.slow  # builds and steps pgx's backgammon inside the search model: ~25 s on 2 vCPUs
def test_backgammon_signs_each_edge_by_who_moves_next():
    # pgx plays one die per step: within a turn the mover moves again (+gamma), at its end the turn
    # passes (-gamma). The perfect model reads which from the rules.
    env = make_env("pgx:backgammon")
    assert env.spec.per_step_turn_signs
    model = make_perfect_model(env, _Uninformed(env.spec.num_actions), -1.0, env.spec.num_actions,
                               per_step_signs=True)
    state, step = env.init(jax.random.PRNGKey(3))
    history = init_history(1, 1, env.spec.obs_shape)  # the uninformed network ignores it
    root = PerfectModelRoot(jax.tree.map(lambda x: x[None], state), history, jnp.asarray([False]),
                            jnp.asarray([step.to_play], jnp.int32))
    embedding = model.root(None, jax.random.PRNGKey(0), root).embedding
    recurrent = jax.jit(model.recurrent)  # one compiled step instead of eager dispatch through pgx
    seen = set()
    for _ in range(8):  # a few checker moves of the first turns, each from the model's own state
        action = 1 + int(np.flatnonzero(np.asarray(embedding.env_state.legal_action_mask[0]))[0])
        out, child = recurrent(None, jax.random.PRNGKey(4), jnp.asarray([action]), embedding)
        assert not bool(child.done[0])
        same = int(child.to_play[0]) == int(embedding.to_play[0])
        seen.add(same)
        assert float(out.discount[0]) == (1.0 if same else -1.0)
        embedding = child
    assert seen == {True, False}  # both kinds of edge were checked


class _ScoreNet(NamedTuple):
    """A territory network's outputs, fixed: value 0.25, a score margin of 0.1 of the board's points."""

    num_actions: int

    def initial_inference(self, params, stacked_obs):
        batch = stacked_obs.shape[0]
        return SimpleNamespace(policy_logits=jnp.zeros((batch, self.num_actions)), value=jnp.full((batch,), 0.25),
                               ownership_logits=jnp.zeros((batch, 9, 9)), score=jnp.full((batch,), 0.1))


@pytest.mark.slow  # pgx's go inside the model, compiled
def test_the_score_utility_adds_the_margin_at_leaves_and_at_the_game_s_end():
    from moozi.core.alphazero import ScoreUtility, score_utility

    env = make_env("pgx:go_9x9")
    spec = env.spec
    coef, scale = 0.3, 10.0
    expected = {margin: coef * (2 / np.pi) * np.arctan(margin / scale) for margin in (8.1, 7.5)}
    assert float(score_utility(jnp.float32(8.1), coef, scale)) == pytest.approx(expected[8.1], rel=1e-5)
    state, step = env.init(jax.random.PRNGKey(0))
    history = init_history(1, 1, spec.obs_shape)
    root = PerfectModelRoot(jax.tree.map(lambda x: x[None], state), history, jnp.asarray([False]),
                            jnp.asarray([step.to_play], jnp.int32))
    pass_action = jnp.asarray([spec.num_actions - 1])  # pgx's pass is its last action (81), the bridge's 82
    for utility in (None, ScoreUtility(coef, scale, spec.territory)):
        model = make_perfect_model(env, _ScoreNet(spec.num_actions), -1.0, spec.num_actions, utility=utility)
        recurrent = jax.jit(model.recurrent)
        root_out = model.root(None, jax.random.PRNGKey(0), root)
        # Black passes: a leaf, valued by the network (the score head's 8.1 points in the utility).
        out, child = recurrent(None, jax.random.PRNGKey(1), pass_action, root_out.embedding)
        leaf_bonus = 0.0 if utility is None else expected[8.1]
        assert float(root_out.value[0]) == pytest.approx(0.25 + leaf_bonus, rel=1e-5)
        assert not bool(child.done[0]) and float(out.value[0]) == pytest.approx(0.25 + leaf_bonus, rel=1e-5)
        # White passes: the game ends on an empty board, white wins by komi (7.5) and gets the reward.
        out, end = recurrent(None, jax.random.PRNGKey(2), pass_action, child)
        assert bool(end.done[0]) and float(out.value[0]) == 0.0 and float(out.discount[0]) == 0.0
        end_bonus = 0.0 if utility is None else expected[7.5]
        assert float(out.reward[0]) == pytest.approx(1.0 + end_bonus, rel=1e-5)


def test_the_score_utility_is_refused_where_no_score_is_learned():
    from moozi.builders import make_act
    from moozi.config import build_config
    from moozi.errors import MooziError
    from moozi.builders import env_spec

    config = build_config("tic_tac_toe", overrides={"agent": "alphazero", "planner.score_utility": "0.3"})
    with pytest.raises(MooziError, match=r"planner\.score_utility needs agent=alphazero on a territory game"):
        make_act(config, env_spec(config), config.planner)
    with pytest.raises(MooziError, match=r"planner\.score_utility must be >= 0"):
        build_config("go9", overrides={"planner.score_utility": "-1"})
