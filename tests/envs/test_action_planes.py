"""Each action's plane covers the cell where the bridge's own observation shows the new piece."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from moozi.envs.action_planes import action_planes
from moozi.envs.registry import make_env

GAMES = ["openspiel:connect_four", "openspiel:tic_tac_toe", "pgx:connect_four", "pgx:tic_tac_toe"]


def _pieces(obs: np.ndarray) -> np.ndarray:
    """[H, W] cells holding either player's piece: the first two channels (mover's, opponent's)."""
    return obs[..., 0] + obs[..., 1]


def _play(env, actions):
    """The observation after each action, by whichever interface the bridge has."""
    if hasattr(env, "reset"):
        out = env.reset(seed=0)
        yield out
        for action in actions:
            out = env.step(action, False)
            yield out
        return
    state, out = env.init(jax.random.PRNGKey(0))
    yield jax.device_get(out)
    for action in actions:
        state, out = env.step(state, action, False, jax.random.PRNGKey(0))
        yield jax.device_get(out)


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.slow
def test_every_move_lands_inside_its_action_plane(game):
    env = make_env(game)
    planes = action_planes(env.spec)
    assert planes.shape == (env.spec.num_actions, *env.spec.obs_shape[:2])
    assert not planes[0].any()  # the dummy acts nowhere
    rng = np.random.default_rng(0)
    outs, actions = [], []
    out = next(_play(env, []))
    for _ in range(8):  # a random game's first moves, none of them winning yet
        legal = np.flatnonzero(np.asarray(out.legal_actions))
        actions.append(int(rng.choice(legal)))
        outs = list(_play(env, actions))
        out = outs[-1]
        if bool(out.is_last):
            break
    for before, after, action in zip(outs, outs[1:], actions):
        added = _pieces(np.asarray(after.obs)) - _pieces(np.asarray(before.obs))
        assert added.sum() == 1 and (added * planes[action]).sum() == 1, (game, action)


def test_games_without_a_map_get_none():
    assert action_planes(make_env("openspiel:go(board_size=9,komi=7.5)").spec) is None
