"""The backgammon opponents `pubeval` and `gnubg` (moozi/evaluation/gnubg_bots.py) against pgx's rules:
the board each evaluator reads is pgx's position, every turn it chooses is played in pgx exactly, and
they play as their reputations say."""

import sys
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

gnubg = pytest.importorskip("gnubg_nn")
pgx = pytest.importorskip("pgx")

from moozi.builders import env_spec  # noqa: E402
from moozi.config import build_config  # noqa: E402
from moozi.errors import MooziError  # noqa: E402
from moozi.evaluation.backgammon_bot import flip_board  # noqa: E402
from moozi.evaluation.gnubg_bots import GnubgOpponent, gnubg_board, turn_moves  # noqa: E402
from moozi.evaluation.matches import evaluate  # noqa: E402

OPENING = np.array([2, 0, 0, 0, 0, -5, 0, -3, 0, 0, 0, 5, -5, 0, 0, 0, 3, 0, 5, 0, 0, 0, 0, -2, 0, 0, 0, 0])
GNUBG_OPENING_ID = "4HPwATDgc/ABMA"  # GNU Backgammon's position ID of the starting position


@pytest.fixture(scope="module")
def game():
    """pgx's backgammon and its step, jitted once for the module."""
    env = pgx.make("backgammon")
    return env, jax.jit(env.step)


@pytest.mark.slow
def test_gnubg_reads_pgx_s_boards_from_either_side(game):
    assert gnubg.position_id(gnubg_board(OPENING)) == GNUBG_OPENING_ID
    for board in _random_positions(game, 30, np.random.default_rng(0)):
        mover, other = gnubg_board(board), gnubg_board(np.asarray(flip_board(jnp.asarray(board))))
        assert other == mover[::-1]  # the other player's view swaps the lists
        assert sum(mover[1]) + board[26] == 15 and sum(mover[0]) - board[27] == 15  # every checker counted


def _apply(board: list[list[int]], moves) -> list[list[int]]:
    """gnubg's board after the mover's checker moves (from, to), by hand: a single opposing checker on
    the target goes to its bar."""
    opponent, mover = [list(side) for side in board]
    for start, end in moves:
        mover[24 if start == 25 else start - 1] -= 1
        if end > 0:
            mover[end - 1] += 1
            if opponent[24 - end] == 1:  # the mover's point p is the opponent's 25 - p
                opponent[24 - end], opponent[24] = 0, opponent[24] + 1
    return [opponent, mover]


def _random_positions(game, count: int, rng) -> list[np.ndarray]:
    """Boards (pgx's, the mover's view) of random games after a random number of checker moves."""
    env, step = game
    out = []
    for _ in range(count):
        state = env.init(jax.random.key(int(rng.integers(1 << 30))))
        for _ in range(int(rng.integers(0, 120))):
            legal = np.flatnonzero(np.asarray(state.legal_action_mask))
            state = step(state, int(rng.choice(legal)), jax.random.key(int(rng.integers(1 << 30))))
            if bool(state.terminated):
                break
        if not bool(state.terminated):
            out.append(np.asarray(state._board))
    return out


@pytest.mark.parametrize("evaluator", ["pubeval", "gnubg"])
@pytest.mark.slow  # 60 random positions of pgx, stepped eagerly through jitted steps: ~15 s each
def test_each_turn_is_played_in_pgx_exactly_as_the_evaluator_chose_it(game, evaluator):
    env, step = game
    rng = np.random.default_rng(1)
    checked = 0
    while checked < 60:
        state = env.init(jax.random.key(int(rng.integers(1 << 30))))
        for _ in range(int(rng.integers(0, 150))):  # a random position, the mover's turn not begun
            legal = np.flatnonzero(np.asarray(state.legal_action_mask))
            state = step(state, int(rng.choice(legal)), jax.random.key(int(rng.integers(1 << 30))))
            if bool(state.terminated):
                break
        if bool(state.terminated) or int(state._played_dice_num) != 0:
            continue
        mover, dice = int(state.current_player), tuple(int(d) + 1 for d in np.asarray(state._dice))
        chosen = turn_moves(evaluator, gnubg_board(np.asarray(state._board)), dice)
        expected = _apply(gnubg_board(np.asarray(state._board)), chosen)
        bot = GnubgOpponent(evaluator)
        played = 0
        while int(state.current_player) == mover and not bool(state.terminated):
            batch = jax.tree.map(lambda x: x[None], state)
            action = int(bot.actions(batch, np.array([True]))[0]) - 1
            assert bool(state.legal_action_mask[action])
            state = step(state, action, jax.random.key(int(rng.integers(1 << 30))))
            played += 1
            assert played <= len(chosen) + 1
        board = np.asarray(state._board if int(state.current_player) == mover else flip_board(state._board))
        assert gnubg_board(board) == expected, (evaluator, dice, chosen)
        checked += 1


class _EvaluatorAsAgent:
    """A stand-in agent for `evaluate` that plays one of the evaluators (the agent's seat is game i % 2)."""

    def __init__(self, evaluator: str):
        self.config = build_config("backgammon")
        self.spec = env_spec(self.config)
        self.variables = None
        self.needs_env_state = True
        bot = GnubgOpponent(evaluator)

        def batched_act(variables, history, step, last_action, env_state, key):
            mine = (np.asarray(step.to_play) == np.arange(len(step.to_play)) % 2) & ~np.asarray(step.is_last)
            return history, SimpleNamespace(action=bot.actions(env_state, mine))

        self.batched_act = batched_act


@pytest.mark.slow  # whole games: ~60 batched steps of pgx per game and evaluator
def test_the_evaluators_beat_a_random_mover_and_gnubg_beats_pubeval():
    for evaluator in ("pubeval", "gnubg"):
        result = evaluate(_EvaluatorAsAgent(evaluator), "backgammon", "random", num_games=10, seed=0)
        assert result.wins >= 9 and result.unfinished == 0, result
        assert result.points_per_game >= 1.0, result  # gammons against a random mover count double
    match = evaluate(_EvaluatorAsAgent("gnubg"), "backgammon", "pubeval", num_games=20, seed=0)
    assert match.wins > match.losses and match.unfinished == 0, match
    assert "points per game" in match.format_table()


def test_the_opponents_need_the_package_and_say_which(monkeypatch):
    monkeypatch.setitem(sys.modules, "gnubg_nn", None)  # import gnubg_nn now raises ImportError
    with pytest.raises(MooziError, match=r'gnubg-nn package: pip install -e "\.\[backgammon\]"'):
        GnubgOpponent("pubeval")
