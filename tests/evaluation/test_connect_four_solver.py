"""The bitbully wrapper against OpenSpiel's connect_four: column numbering, score signs, perfect play."""

import sys

import numpy as np
import pyspiel
import pytest
from open_spiel.python.algorithms import evaluate_bots

from moozi.errors import MooziError
from moozi.evaluation import evaluate, make_opponent

pytest.importorskip("bitbully")
from moozi.evaluation import connect_four_solver as c4  # noqa: E402

GAME = pyspiel.load_game("connect_four")


def _state(moves):
    state = GAME.new_initial_state()
    for move in moves:
        state.apply_action(move)
    return state


def _immediate_win_score(plies: int) -> int:
    return 22 - (plies + 2) // 2  # 22 minus the winner's stone count after its winning move


def test_empty_board_column_3_is_the_only_win_for_the_first_player():
    scores = c4.score_moves([])
    assert sorted(scores) == list(range(7))
    assert scores[3] > 0 and all(scores[c] <= 0 for c in range(7) if c != 3)
    assert c4.best_moves(scores) == [3] and c4.result_keeping_moves(scores) == [3]
    assert c4.value_of(scores) == 1


@pytest.mark.parametrize(
    "moves, mover, winning_column",
    [
        # player 0 holds columns 0-2 of the bottom row (asymmetric, so a mirrored numbering would fail)
        ([0, 6, 1, 6, 2, 5], 0, 3),
        # player 1 holds columns 0-2 of the bottom row and must also stop player 0's 4-5-6
        ([6, 0, 6, 1, 5, 2, 4], 1, 3),
        # player 1 holds three of column 0 stacked: it wins on top of them
        ([1, 0, 2, 0, 6, 0, 5], 1, 0),
    ],
)
def test_an_immediate_win_is_the_unique_best_move_with_a_positive_score(moves, mover, winning_column):
    state = _state(moves)
    assert state.current_player() == mover
    child = state.child(winning_column)
    assert child.is_terminal() and child.returns()[mover] == 1.0  # OpenSpiel agrees it wins at once
    scores = c4.score_moves(state)
    assert c4.best_moves(scores) == [winning_column]
    assert scores[winning_column] == _immediate_win_score(len(moves)) > 0
    assert c4.value_of(scores) == 1


def test_scores_agree_with_openspiel_on_every_move_of_random_positions():
    """Across random positions: a move scores the immediate-win score exactly when OpenSpiel says it
    wins at once, and a move after which the opponent wins at once scores that score negated."""
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(20):
        state = GAME.new_initial_state()
        for _ in range(rng.integers(0, 30)):
            move = int(rng.choice(state.legal_actions()))
            if state.child(move).is_terminal():
                break
            state.apply_action(move)
        scores = c4.score_moves(state)
        assert sorted(scores) == state.legal_actions()
        mover, plies = state.current_player(), len(state.history())
        for column, score in scores.items():
            child = state.child(column)
            wins_now = child.is_terminal() and child.returns()[mover] == 1.0
            assert (score == _immediate_win_score(plies)) == wins_now
            if not child.is_terminal():
                reply = c4.score_moves(child)
                assert -max(reply.values()) == score  # negamax: the mover's score is the reply's negated
            checked += 1
    assert checked > 60


def test_state_and_move_list_give_the_same_scores():
    moves = [3, 3, 2, 4, 1]
    assert c4.moves_of(_state(moves)) == moves
    assert c4.score_moves(_state(moves)) == c4.score_moves(moves)


def test_result_keeping_moves_follow_the_sign_of_the_best_score():
    scores = {0: -3, 1: 2, 2: 0, 3: 5, 4: 1, 5: -1}
    assert c4.best_moves(scores) == [3]
    assert c4.result_keeping_moves(scores) == [1, 3, 4]
    assert c4.value_of(scores) == 1
    drawn = {0: -2, 1: 0, 2: 0, 3: -1}
    assert c4.best_moves(drawn) == [1, 2] and c4.result_keeping_moves(drawn) == [1, 2] and c4.value_of(drawn) == 0
    lost = {0: -5, 1: -2, 2: -2}
    assert c4.best_moves(lost) == [1, 2] and c4.result_keeping_moves(lost) == [0, 1, 2] and c4.value_of(lost) == -1


@pytest.mark.parametrize(
    "position, message",
    [
        ([0, 6, 1, 6, 2, 5, 3], "has ended"),
        ([0] * 7, "column was full"),
        ([7], "columns 0..6"),
        (pyspiel.load_game("tic_tac_toe").new_initial_state(), "standard 6x7 board"),
        (pyspiel.load_game("connect_four(rows=5)").new_initial_state(), "standard 6x7 board"),
    ],
)
def test_positions_it_cannot_score_are_refused(position, message):
    with pytest.raises(MooziError, match=message):
        c4.score_moves(position)


def test_solver_bot_chooses_among_the_best_moves_only_and_varies_with_the_seed():
    state = _state([0])
    best = c4.best_moves(c4.score_moves(state))
    assert len(best) > 1
    chosen = {c4.SolverBot(seed).step(state) for seed in range(12)}
    assert chosen == set(best)


def test_solver_as_first_player_always_beats_random():
    for seed in range(6):
        bots = [c4.SolverBot(seed), pyspiel.make_uniform_random_bot(1, seed)]
        returns = evaluate_bots.evaluate_bots(GAME.new_initial_state(), bots, np.random.RandomState(seed))
        assert returns == [1.0, -1.0]


def test_solver_against_itself_the_first_player_wins():
    for seed in range(2):
        bots = [c4.SolverBot(seed), c4.SolverBot(seed + 100)]
        returns = evaluate_bots.evaluate_bots(GAME.new_initial_state(), bots, np.random.RandomState(seed))
        assert returns == [1.0, -1.0]


class _OpponentAgent:
    def __init__(self, spec):
        self.spec = spec

    def as_openspiel_bot(self, player_id):
        return make_opponent(self.spec, GAME, player_id, player_id)


def test_solver_opponent_plays_both_seats_and_never_loses_to_itself_as_first_player():
    result = evaluate(_OpponentAgent("solver"), "connect_four", "solver", num_games=2, seed=0)
    assert [(s.player, s.games) for s in result.per_seat] == [(0, 1), (1, 1)]
    assert (result.per_seat[0].wins, result.per_seat[1].losses) == (1, 1)


@pytest.mark.parametrize("game", ["tic_tac_toe", "go(board_size=5)", "connect_four(columns=6)"])
def test_solver_opponent_refuses_other_games(game):
    with pytest.raises(MooziError, match="connect_four") as info:
        make_opponent("solver", pyspiel.load_game(game), 0, 0)
    assert "\n" not in str(info.value)


def test_a_missing_solver_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "bitbully", None)  # `import bitbully` now raises ImportError
    c4._engine.cache_clear()
    try:
        with pytest.raises(MooziError, match=r'pip install -e "\.\[solvers\]" \(in the moozi checkout\)'):
            c4.score_moves([])
        with pytest.raises(MooziError, match=r'pip install -e "\.\[solvers\]" \(in the moozi checkout\)'):
            make_opponent("solver", GAME, 0, 0)
    finally:
        c4._engine.cache_clear()
