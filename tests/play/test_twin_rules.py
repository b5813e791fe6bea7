"""The pgx twin follows the OpenSpiel game being played: its komi and its length (PgxTwinBot)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
import pytest

from moozi.builders import env_spec
from moozi.config import build_config
from moozi.core.history import init_history
from moozi.play.go_rules import new_go_game, repeats_position
from moozi.play.openspiel_bot import PgxTwinBot, twin_env, twin_options

E5, F5, E4, PASS = 40, 41, 31, 81


class _Recorder:
    """An AlphaZero-like agent on pgx's go: records what the bot gives it and plays the first legal stone."""

    needs_env_state = True

    def __init__(self):
        self.config = build_config("go9", overrides={"planner.play_pass_rule": "search"})
        self.spec = env_spec(self.config)
        self.variants, self.seen = [], []

    def new_history(self):
        return init_history(1, self.config.targets.history_length, self.spec.obs_shape)

    def searching_variant(self, **options):
        self.variants.append(options)
        return self

    def act(self, history, step, last_action, env_state=None):
        self.seen.append((step, env_state))
        stones = np.flatnonzero(np.asarray(step.legal_actions)[1:PASS + 1])
        return history, int(stones[0]) + 1 if len(stones) else PASS + 1, 0.0


def _final_reward(env, actions) -> float:
    """The reward of the last mover after replaying `actions` (OpenSpiel ids) in the pgx env."""
    state, out = env.init(jax.random.PRNGKey(0))
    for action in actions:
        state, out = env.step(state, jnp.int32(action + 1), jnp.bool_(False), jax.random.PRNGKey(0))
    assert bool(out.is_last)
    return float(out.reward)


@pytest.mark.slow
@pytest.mark.parametrize("komi", [0.5, 7.5])
def test_the_twin_takes_the_komi_of_the_game_played(komi):
    # Black E5 and E4, white F5, then two passes: black 2 stones, white 1, nothing else owned: 1 - komi.
    moves = [E5, F5, E4, PASS, PASS]
    game = new_go_game(9, komi, 810)
    state = game.new_initial_state()
    for move in moves:
        state.apply_action(move)
    black_return = state.returns()[0]
    assert black_return == (1.0 if komi == 0.5 else -1.0)  # the winner flips with komi
    agent = _Recorder()
    assert twin_options(agent, game) == {"komi": komi, "max_terminal_steps": 810}
    assert _final_reward(twin_env(agent, game), moves) == black_return  # black moved last
    assert twin_options(agent, pyspiel.load_game("go(board_size=9,komi=7.5)")) == {}  # the trained twin itself


def _long_game(plies: int, game: pyspiel.Game, seed: int = 0) -> pyspiel.State:
    """`plies` random moves (stones where any is left that repeats no position; a lone pass otherwise)."""
    rng = np.random.default_rng(seed)
    state = game.new_initial_state()
    while len(state.history()) < plies:
        stones = [a for a in state.legal_actions() if a != PASS and not repeats_position(state, a)]
        state.apply_action(int(rng.choice(stones)) if stones else PASS)
        assert not state.is_terminal()
    return state


@pytest.mark.slow
def test_a_position_past_pgx_s_default_length_gets_a_real_move():
    game = new_go_game(9, 6.5, 810)  # as `moozi gtp` plays after `komi 6.5`
    state = _long_game(200, game)
    agent = _Recorder()
    bot = PgxTwinBot(agent, state.current_player())
    move = bot.step(state)
    assert agent.variants == [{"komi": 6.5, "max_terminal_steps": 810}]  # the search's rules too
    step, env_state = agent.seen[-1]
    assert not bool(step.is_last) and int(env_state._step_count) == 200
    assert move != PASS and move in state.legal_actions()
    bot.step(state)  # the second move of the same variant builds nothing new
    assert len(agent.variants) == 1
