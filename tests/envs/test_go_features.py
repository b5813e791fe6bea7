"""Go feature planes (moozi/envs/go_features.py) on positions played through pgx's go."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")

from moozi.envs.go_features import NUM_PLANES, liberties  # noqa: E402
from moozi.envs.pgx import make  # noqa: E402


def _play(moves: list[int], **options):
    """pgx go_9x9 after `moves` (library point indices row * 9 + column; 81 passes)."""
    env = make("pgx:go_9x9", go_features=True, **options)
    step = jax.jit(env.step)
    state, out = env.init(jax.random.PRNGKey(0))
    for move in moves:
        state, out = step(state, jnp.int32(move + 1), jnp.bool_(False), jax.random.PRNGKey(0))
    return env, state, np.asarray(out.obs)


def _points(plane) -> set[tuple[int, int]]:
    return {tuple(p) for p in np.argwhere(plane > 0).tolist()}


@pytest.mark.slow
def test_the_observation_gains_seven_planes():
    env, _, obs = _play([])
    assert env.spec.obs_shape == (9, 9, 17 + NUM_PLANES)
    assert obs.shape == (9, 9, 17 + NUM_PLANES)
    assert not obs[..., 17:].any()  # an empty board: no stones, no ko


@pytest.mark.slow
def test_liberties_are_counted_exactly_and_atari_marked():
    # Black (0, 0) corner stone; white plays (0, 1): the black stone has one liberty (1, 0).
    # Then black plays (4, 4) and (4, 5): a two-stone group with 6 liberties. White passes in between.
    _, state, obs = _play([0, 1, 40, 81, 41])
    libs = np.asarray(liberties(state._x.board[:81], 9)).reshape(9, 9)
    assert libs[0, 0] == 1 and libs[0, 1] == 2 and libs[4, 4] == 6 and libs[4, 5] == 6
    # White to move now: the mover's (white) stones come first.
    assert _points(obs[..., 17 + 1]) == {(0, 1)}  # white's stone with two liberties
    assert _points(obs[..., 17 + 3]) == {(0, 0)}  # black's stone in atari
    assert _points(obs[..., 17 + 5]) == {(4, 4), (4, 5)}


@pytest.mark.slow
def test_the_ko_point_is_marked_for_the_player_who_may_not_retake():
    #  . B W .        black captures the white stone at (1, 1) by playing (1, 2); white may not
    #  B W . W        retake at (1, 1) at once (ko)
    #  . B W .
    moves = [1, 2, 9, 10, 19, 12, 80, 20, 11]
    _, state, obs = _play(moves)
    assert int(state._x.ko) == 10
    assert not bool(state.legal_action_mask[10])
    assert _points(obs[..., 17 + 6]) == {(1, 1)}
    # The capturing black stone is in atari, seen from white (the mover) as the opponent's.
    assert (1, 2) in _points(obs[..., 17 + 3])
