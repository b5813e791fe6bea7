"""AlphaZero mode: mctx search with pgx's rules as the model finds wins and blocks losses."""

from __future__ import annotations

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
