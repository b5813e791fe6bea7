"""Each action's plane covers the cell where the bridge's own observation shows the new piece; each
backgammon action's features name the points pgx moves a checker between."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from moozi.envs.action_planes import action_features, action_planes
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


@pytest.mark.slow
def test_backgammon_action_features_name_the_points_pgx_moves_a_checker_between():
    import pgx

    spec = make_env("pgx:backgammon").spec
    features = action_features(spec)
    assert features.shape == (spec.num_actions, 26 + 6 + 25)
    assert not features[0].any()  # the dummy action
    library_env = pgx.make("backgammon")
    step = jax.jit(library_env.step)
    rng = np.random.default_rng(0)
    state = library_env.init(jax.random.key(1))
    checked = 0
    for i in range(400):
        legal = np.flatnonzero(np.asarray(state.legal_action_mask))
        action = int(rng.choice(legal))
        child = step(state, action, jax.random.key(i))
        if bool(child.terminated):
            break
        row = features[action + 1]
        source, die, target = np.flatnonzero(row[:26]), np.flatnonzero(row[26:32]), np.flatnonzero(row[32:])
        assert len(source) == 1 and len(die) == 1 and die[0] == action % 6
        if source[0] != 0 and int(child.current_player) == int(state.current_player):  # a move, board not flipped
            before, after = np.asarray(state._board), np.asarray(child._board)
            # pgx's board: points 0..23, the mover's bar 24, the mover's checkers off 26 (the mover's are > 0).
            moved_from = 24 if source[0] == 1 else source[0] - 2
            moved_to = 26 if target[0] == 24 else target[0]
            change = np.maximum(after, 0) - np.maximum(before, 0)
            assert change[moved_from] == -1 and change[moved_to] == 1, (action, before, after)
            checked += 1
        state = child
    assert checked >= 20
