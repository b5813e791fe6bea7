"""TD-Gammon's encoding of pgx's backgammon board (moozi/envs/backgammon_features.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")

from moozi.envs.backgammon_features import NUM_FEATURES, backgammon_features  # noqa: E402
from moozi.envs.pgx import make  # noqa: E402
from moozi.errors import MooziError  # noqa: E402

# pgx's opening board, mover's view: the mover's checkers positive, moving from point 0 to 23.
OPENING = [2, 0, 0, 0, 0, -5, 0, -3, 0, 0, 0, 5, -5, 0, 0, 0, 3, 0, 5, 0, 0, 0, 0, -2, 0, 0, 0, 0]


def _split(features):
    features = np.asarray(features)
    mover = features[:96].reshape(24, 4)
    opponent = features[96:192].reshape(24, 4)
    return mover, opponent, features[192:]


def test_the_opening_position_by_hand():
    mover, opponent, counters = _split(backgammon_features(jnp.array(OPENING)))
    assert backgammon_features(jnp.array(OPENING)).shape == (NUM_FEATURES,)
    np.testing.assert_array_equal(mover[0], [1, 1, 0, 0])  # two back checkers
    np.testing.assert_array_equal(mover[11], [1, 1, 1, 1])  # five: (5 - 3) / 2
    np.testing.assert_array_equal(mover[16], [1, 1, 1, 0])  # three
    np.testing.assert_array_equal(opponent[5], [1, 1, 1, 1])
    np.testing.assert_array_equal(opponent[23], [1, 1, 0, 0])
    assert mover[[1, 5, 23]].sum() == 0 and opponent[[0, 11]].sum() == 0
    # No checker on a bar or borne off; both pip counts are the opening's 167.
    np.testing.assert_allclose(counters, [0, 0, 0, 0, 1, 1])


def test_bars_trays_blots_and_pip_counts():
    board = np.zeros(28, np.int32)
    board[22], board[23] = 1, 6  # mover: a blot 2 pips from home, 6 checkers 1 pip away
    board[24], board[26] = 2, 6  # mover: 2 on the bar, 6 borne off
    board[3], board[25], board[27] = -10, -1, -4  # opponent: 10 on its 4-point, 1 on the bar, 4 off
    mover, opponent, counters = _split(backgammon_features(jnp.array(board)))
    np.testing.assert_array_equal(mover[22], [1, 0, 0, 0])
    np.testing.assert_array_equal(mover[23], [1, 1, 1, 1.5])
    np.testing.assert_array_equal(opponent[3], [1, 1, 1, 3.5])
    mover_pips = 1 * 2 + 6 * 1 + 2 * 25
    opponent_pips = 10 * 4 + 1 * 25
    np.testing.assert_allclose(counters, [1.0, 0.5, 6 / 15, 4 / 15, mover_pips / 167, opponent_pips / 167], rtol=1e-6)


@pytest.mark.slow
def test_the_bridge_appends_them_and_follows_the_mover():
    plain, featured = make("pgx:backgammon"), make("pgx:backgammon", backgammon_features=True)
    assert featured.spec.obs_shape == (1, 1, plain.spec.obs_shape[-1] + NUM_FEATURES)
    step = jax.jit(featured.step)
    state, out = featured.init(jax.random.PRNGKey(3))
    rng = np.random.default_rng(0)
    movers = set()
    for _ in range(40):  # through several changes of turn: the features always read the mover's view
        obs = np.asarray(out.obs)[0, 0]
        np.testing.assert_array_equal(obs[:34], np.asarray(state.observation, np.float32))
        np.testing.assert_allclose(obs[34:], np.asarray(backgammon_features(state._board)), rtol=1e-6)
        movers.add(int(state.current_player))
        action = int(rng.choice(np.flatnonzero(np.asarray(out.legal_actions))))
        state, out = step(state, jnp.int32(action), out.is_last, jax.random.PRNGKey(int(rng.integers(1 << 30))))
    assert movers == {0, 1}


def test_other_games_refuse_the_option():
    with pytest.raises(MooziError, match="backgammon_features"):
        make("pgx:2048", backgammon_features=True)


def test_the_config_key_reaches_the_bridge_and_other_games_refuse_it():
    from moozi.builders import env_options
    from moozi.config import build_config

    config = build_config("backgammon", overrides={"env.backgammon_features": True})
    assert env_options(config) == {"backgammon_features": True}
    with pytest.raises(MooziError, match="env.backgammon_features is for pgx's backgammon"):
        env_options(build_config("2048", overrides={"env.backgammon_features": True}))
