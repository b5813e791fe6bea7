"""Backgammon evaluation: the greedy pip-count bot against pgx's rules, and `evaluate` playing a
two-player pgx game without an OpenSpiel twin in one batch of games."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest
from pgx import backgammon as pgx_backgammon

from moozi.builders import env_spec
from moozi.config import build_config
from moozi.errors import MooziError
from moozi.evaluation.backgammon_bot import flip_board, pip_count_policy, pip_count_score
from moozi.evaluation.matches import EvalResult, evaluate

OPENING = np.array([2, 0, 0, 0, 0, -5, 0, -3, 0, 0, 0, 5, -5, 0, 0, 0, 3, 0, 5, 0, 0, 0, 0, -2, 0, 0, 0, 0])


@pytest.mark.slow
def test_flip_board_is_pgx_turn_change():
    rng = np.random.default_rng(0)
    for _ in range(20):
        board = jnp.asarray(rng.integers(-3, 4, size=28), jnp.int32)
        np.testing.assert_array_equal(flip_board(board), pgx_backgammon._flip_board(board))
    np.testing.assert_array_equal(jnp.asarray(OPENING), pgx.make("backgammon").init(jax.random.key(0))._board)


def test_pip_count_score_by_hand():
    # The opening: 167 pips each, no blots, four made points -> 2 * 4.
    assert float(pip_count_score(jnp.asarray(OPENING))) == 8.0
    # One checker from the 13-point (index 11) to the 10-point (index 14): 3 pips ahead; a blot on
    # index 14 that the opponent's checkers on 23 can reach (-8); the 13-point is still made.
    moved = OPENING.copy()
    moved[11] -= 1
    moved[14] += 1
    assert float(pip_count_score(jnp.asarray(moved))) == 8.0 + 3.0 - 8.0
    # The same blot with no opponent checker behind it is safe: the opponent runs towards index 0.
    safe = np.zeros(28, int)
    safe[20], safe[2], safe[26], safe[27] = 1, -1, 14, -14
    # Own pips 4, the opponent's 3; one checker each, no points made, the blot cannot be reached.
    assert float(pip_count_score(jnp.asarray(safe))) == 3.0 - 4.0
    safe[25] = -1  # ... unless the opponent has a checker on the bar: 25 pips more for it, and exposed
    assert float(pip_count_score(jnp.asarray(safe))) == 3.0 + 25.0 - 4.0 - 8.0


@pytest.mark.slow
def test_the_bot_hits_a_blot_it_can_reach():
    env = pgx.make("backgammon")
    state = env.init(jax.random.key(0))
    board = np.zeros(28, np.int32)
    board[10], board[12] = 2, -1  # two of ours on index 10; an opponent blot on 12, two pips on
    board[26], board[27] = 13, -14  # borne off: the opponent's count is negative too
    board = jnp.asarray(board)
    playable = jnp.asarray([1, 3, -1, -1], jnp.int32)  # dice 2 and 4 (pgx counts dice from 0)
    state = state.replace(_board=board, _dice=jnp.asarray([1, 3], jnp.int32), _playable_dice=playable,
                          _played_dice_num=jnp.int32(0),
                          legal_action_mask=pgx_backgammon._legal_action_mask(board, playable))
    states = jax.tree.map(lambda x: x[None], state)
    action = int(pip_count_policy()(states, jax.random.key(1))[0])  # jitted: eagerly, 156 pgx steps take ~15 s
    # Action src * 6 + die index; source point 10 is pgx's src 12 (0 and 1 are the no-op and the bar).
    assert divmod(action, 6) == (10 + 2, 1), action  # point 10 with the 2: the hit


class _BatchBot:
    """A stand-in agent for `evaluate`: plays the pip-count bot, or uniformly at random."""

    def __init__(self, plays: str):
        self.config = build_config("backgammon")
        self.spec = env_spec(self.config)
        self.variables = None
        self.needs_env_state = True
        pick = pip_count_policy()

        def batched_act(variables, history, step, last_action, env_state, key):
            if plays == "pipcount":
                action = np.asarray(pick(env_state, key)) + 1
            else:
                action = np.asarray(jax.random.categorical(key, jnp.where(step.legal_actions, 0.0, -jnp.inf)))
            return history, SimpleNamespace(action=action)

        self.batched_act = batched_act


@pytest.mark.slow  # ~300 batched steps of 20 backgammon games, each a jitted search over every checker move
def test_evaluate_plays_backgammon_in_a_batch_both_seats():
    strong = evaluate(_BatchBot("pipcount"), "backgammon", "random", num_games=20, seed=0)
    assert isinstance(strong, EvalResult) and strong.game == "pgx:backgammon"
    assert [(s.player, s.games) for s in strong.per_seat] == [(0, 10), (1, 10)]
    assert strong.wins + strong.draws + strong.losses == 20
    assert strong.wins >= 18, strong  # the bot beats a random mover from both seats
    assert all(s.wins >= 9 for s in strong.per_seat), strong.per_seat
    weak = evaluate(_BatchBot("random"), "backgammon", "pipcount", num_games=20, seed=1)
    assert weak.losses >= 18, weak  # the signs hold for the other side too


def test_evaluate_names_the_batch_opponents():
    with pytest.raises(MooziError, match="random, pipcount"):
        evaluate(_BatchBot("random"), "backgammon", "mcts:100", num_games=2, seed=0)
    with pytest.raises(MooziError, match="opening-moves"):
        evaluate(_BatchBot("random"), "backgammon", "random", num_games=2, seed=0, opening_moves=4)


@pytest.mark.slow
def test_games_cut_at_the_step_cap_are_counted(monkeypatch):
    import moozi.evaluation.matches as matches

    monkeypatch.setattr(matches, "_BATCH_MAX_STEPS", 3)  # no backgammon game ends in 3 checker moves
    result = evaluate(_BatchBot("random"), "backgammon", "random", num_games=4, seed=0)
    assert (result.draws, result.unfinished) == (4, 4)
    assert "4 games cut at the step cap" in result.format_table()
    assert EvalResult.from_json(result.to_json()) == result


def test_a_pgx_game_is_refused_as_an_openspiel_opponent_game():
    from moozi.envs.openspiel import load_two_player_game

    # pgx's env has no close(); the refusal must still be the one that names the need.
    with pytest.raises(MooziError, match="not a two-player OpenSpiel game"):
        load_two_player_game("backgammon")
