"""OpenSpiel's connect_four solved exactly by bitbully (the `[solvers]` extra).

Conventions, each checked against OpenSpiel's own results in
tests/evaluation/test_connect_four_solver.py:
- a move is a column 0..6 from the left, in OpenSpiel's actions and bitbully's alike;
- a score is from the view of the player to move: > 0 it wins, 0 a draw, < 0 it
  loses; the further from 0, the sooner the game is decided (an immediate win on a
  board with n stones scores 22 - ceil((n + 1) / 2), e.g. 18 with 6 stones).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import pyspiel

from moozi.errors import MooziError

__all__ = [
    "SolverBot",
    "best_moves",
    "check_connect_four",
    "moves_of",
    "result_keeping_moves",
    "score_moves",
    "solver_version",
    "value_of",
]

_RULES = {"rows": 6, "columns": 7, "x_in_row": 4}  # the only board bitbully solves
_INSTALL = 'pip install -e ".[solvers]" (in the moozi checkout)'


def _bitbully():
    try:
        import bitbully
    except ImportError:
        raise MooziError(f"the Connect Four solver needs the bitbully package: {_INSTALL}") from None
    return bitbully


@functools.lru_cache(maxsize=1)
def _engine():
    # One engine per process: loading the opening book takes ~0.5 s, and its
    # transposition table then speeds up every later call.
    return _bitbully().BitBully()


def solver_version() -> str:
    book = _engine().opening_book_type
    return f"bitbully {_bitbully().__version__}, opening book {'12-ply-dist' if book == 'default' else book}"


def check_connect_four(game: pyspiel.Game) -> None:
    """Raises MooziError unless `game` is OpenSpiel's connect_four on its standard 6x7 board."""
    params = game.get_parameters()
    if game.get_type().short_name != "connect_four" or any(params.get(k, v) != v for k, v in _RULES.items()):
        raise MooziError(f"the Connect Four solver plays only connect_four on the standard 6x7 board, not {game}")


def moves_of(position: pyspiel.State | Sequence[int]) -> list[int]:
    """The columns played so far: from a connect_four `pyspiel.State` or a list of columns."""
    if isinstance(position, pyspiel.State):
        check_connect_four(position.get_game())
        return [int(a) for a in position.history()]
    moves = [int(m) for m in position]
    if any(not 0 <= m < _RULES["columns"] for m in moves):
        raise MooziError(f"connect_four moves are columns 0..6; got {moves}")
    return moves


def _board(moves: list[int]):
    board = _bitbully().Board()
    if not board.play(moves):
        raise MooziError(f"not a legal connect_four game: {moves} (a column was full)")
    if board.is_game_over():
        raise MooziError(f"the connect_four game {moves} has ended: there is no move to score")
    return board


def score_moves(position: pyspiel.State | Sequence[int]) -> dict[int, int]:
    """{column: solver score} for every legal move of a non-terminal position, by column."""
    scores = _engine().score_all_moves(_board(moves_of(position)))
    return {int(column): int(scores[column]) for column in sorted(scores)}


def best_moves(scores: Mapping[int, int]) -> list[int]:
    """The columns with the highest score: the quickest win, or the longest resistance."""
    top = max(scores.values())
    return [c for c in sorted(scores) if scores[c] == top]


def value_of(scores: Mapping[int, int]) -> int:
    """The game-theoretic result for the player to move: +1 win, 0 draw, -1 loss."""
    return int(np.sign(max(scores.values())))


def result_keeping_moves(scores: Mapping[int, int]) -> list[int]:
    """The columns that keep the best move's result (win, draw or loss), however slowly."""
    result = value_of(scores)
    return [c for c in sorted(scores) if np.sign(scores[c]) == result]


class SolverBot(pyspiel.Bot):
    """Perfect play: uniformly random (seeded) among the best-scoring moves, so games vary."""

    def __init__(self, seed: int):
        pyspiel.Bot.__init__(self)
        _engine()  # a missing solver fails here, before any game starts
        self._rng = np.random.default_rng(seed)

    def restart_at(self, state) -> None:
        pass

    def inform_action(self, state, player_id, action) -> None:
        pass

    def step(self, state) -> int:
        return int(self._rng.choice(best_moves(score_moves(state))))
