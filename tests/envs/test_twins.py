"""OpenSpiel games and their pgx twins agree on every action id: same legal moves, same outcomes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.envs.registry import make_env
from moozi.envs.twins import openspiel_twin, pgx_twin, twins


@pytest.mark.parametrize("openspiel_name,pgx_name", sorted(twins().items()))
@pytest.mark.slow
def test_random_games_agree_move_by_move(openspiel_name, pgx_name):
    assert pgx_twin(openspiel_name) == pgx_name and openspiel_twin(pgx_name) == openspiel_name
    host, jax_env = make_env(openspiel_name), make_env(pgx_name)
    step_fn = jax.jit(jax_env.step)
    rng = np.random.default_rng(0)
    games = 3 if "go" in pgx_name else 20
    max_moves = 60 if "go" in pgx_name else 100
    for game in range(games):
        a = host.reset(seed=game)
        state, b = jax_env.init(jax.random.PRNGKey(game))
        for move in range(max_moves):
            np.testing.assert_array_equal(np.asarray(a.legal_actions), np.asarray(b.legal_actions), err_msg=f"move {move}")
            assert bool(a.is_last) == bool(b.is_last)
            assert float(a.reward) == pytest.approx(float(b.reward))
            # pgx draws which player id moves first; only who-moves-next must agree.
            if move and not a.is_last:
                assert (int(a.to_play) == previous[0]) == (int(b.to_play) == previous[1])
            previous = (int(a.to_play), int(b.to_play))
            if a.is_last:
                break
            action = int(rng.choice(np.flatnonzero(a.legal_actions)))
            a = host.step(action, False)
            state, b = step_fn(state, jnp.int32(action), jnp.bool_(False), jax.random.PRNGKey(move))
