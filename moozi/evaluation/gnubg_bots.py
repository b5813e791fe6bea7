"""Backgammon opponents from GNU Backgammon's evaluators, through the gnubg-nn package
(`pip install -e ".[backgammon]"`), for pgx's backgammon:

- `pubeval`: Tesauro's public linear evaluator (1993), the usual yardstick of backgammon programs: a
  program that beats it in most games has learned more than the race and the first safety rules.
- `gnubg`: GNU Backgammon's neural network evaluation at 0 ply (no look-ahead), a strong player.

Each chooses a whole turn, the checker moves of both dice (four on a double), from the position and
the roll, as a player does. pgx plays a turn one checker move (one die) at a time, so the turn's
checker moves are then played one per step, each checked against pgx's own legal moves: a move the
evaluator chose that pgx does not allow is an error naming the position, never a silent substitute.

Boards. pgx's `_board` (28 counts) is the player to move's view: indices 0..23 are the points from
the mover's 24-point to its 1-point, positive counts the mover's checkers, negative the opponent's; 24
is the mover's bar, 25 the opponent's, 26 and 27 the checkers borne off (moozi/evaluation/backgammon_bot.py).
gnubg's board is two lists of 25, the opponent's first and the mover's second, each counted from its
owner's side: index j is its owner's (j + 1)-point, 24 its bar. Its moves are (from, to) pairs of
the mover's points, 25 the bar and 0 off the board.
"""

from __future__ import annotations

import numpy as np

from moozi.errors import MooziError

EVALUATORS = ("pubeval", "gnubg")
_NO_OP_ACTIONS = range(6)  # pgx's micro action 6 * src + die with src 0: "no move", which ends the turn


def require_gnubg():
    """The gnubg_nn module, or a clear error naming the package that provides it."""
    try:
        import gnubg_nn
    except ImportError:
        raise MooziError('the pubeval and gnubg opponents need the gnubg-nn package: pip install -e ".[backgammon]"') from None
    return gnubg_nn


def gnubg_board(board: np.ndarray) -> list[list[int]]:
    """gnubg's [opponent, mover] board of a pgx board seen by the player to move (module docstring)."""
    board = np.asarray(board, dtype=np.int64)
    points = board[:24]
    mover = [int(n) for n in np.maximum(points, 0)[::-1]] + [int(board[24])]
    opponent = [int(n) for n in np.maximum(-points, 0)] + [int(-board[25])]
    return [opponent, mover]


def turn_moves(evaluator: str, board: list[list[int]], dice: tuple[int, int]) -> list[tuple[int, int]]:
    """The evaluator's move for the roll: its checker moves as (from, to) points of the mover."""
    gnubg = require_gnubg()
    if evaluator == "gnubg":
        return [(int(a), int(b)) for a, b in gnubg.best_move(board, dice[0], dice[1])]
    if evaluator == "pubeval":
        flat = gnubg.pub_best_move(board, dice[0], dice[1])  # 0-based: 24 the bar, -1 off
        return [(int(flat[k]) + 1, int(flat[k + 1]) + 1) for k in range(0, len(flat), 2)]
    raise ValueError(f"unknown evaluator {evaluator!r}; allowed: {EVALUATORS}")


def _candidate_actions(move: tuple[int, int], dice_left: list[int]) -> list[int]:
    """pgx's library actions that play the checker move (from, to): 6 * src + (die - 1), src 1 for
    the bar and 2 + i for board index i; a checker borne off uses the exact die or, from the
    farthest point, a larger one (the exact die first)."""
    start, end = move
    src = 1 if start == 25 else 2 + (24 - start)
    if end > 0:
        dice = [start - end]
    else:
        dice = sorted({d for d in dice_left if d >= start}, key=lambda d: (d != start, d))
    return [6 * src + (d - 1) for d in dice if 1 <= d <= 6]


class GnubgOpponent:
    """`pubeval` or `gnubg` as the opponent of moozi's batch of pgx backgammon games
    (moozi/evaluation/vector_matches.py): one library call per turn and game, on the host (gnubg is a
    C library with no batch entry point), the turn's checker moves then played one per step."""

    def __init__(self, evaluator: str):
        if evaluator not in EVALUATORS:
            raise ValueError(f"unknown evaluator {evaluator!r}; allowed: {EVALUATORS}")
        require_gnubg()
        self.evaluator = evaluator
        self._plans: dict[int, list[tuple[int, int]]] = {}

    def library_action(self, game: int, board, dice, playable_dice, played_dice_num: int, legal) -> int:
        """pgx's library action for game `game` at this step of the evaluator's turn."""
        if played_dice_num == 0 or game not in self._plans:
            self._plans[game] = turn_moves(self.evaluator, gnubg_board(board), (int(dice[0]) + 1, int(dice[1]) + 1))
        plan = self._plans[game]
        legal = np.asarray(legal, bool)
        dice_left = [int(d) + 1 for d in playable_dice if d >= 0]
        for index, move in enumerate(plan):
            for action in _candidate_actions(move, dice_left):
                if legal[action]:
                    del plan[index]
                    return action
        if not legal[6:].any():  # the move is over (or there was none): pgx asks for its "no move"
            return next(a for a in _NO_OP_ACTIONS if legal[a])
        gnubg = require_gnubg()
        raise MooziError(
            f"{self.evaluator} chose checker moves {plan} (of its turn with dice {int(dice[0]) + 1}-{int(dice[1]) + 1} "
            f"at position {gnubg.position_id(gnubg_board(board))}) that pgx's backgammon does not allow here; "
            f"pgx allows {[int(a) for a in np.flatnonzero(legal)]}")

    def __call__(self, step, vector_env, to_move: np.ndarray) -> np.ndarray:
        """The opponent policy of moozi/evaluation/vector_matches.py."""
        return self.actions(vector_env.state, to_move)

    def actions(self, state, to_move: np.ndarray) -> np.ndarray:
        """One bridge action per game of a batch of pgx states (library action + 1: the bridge's
        action 0 is its dummy); only the games in `to_move` (the evaluator's turn) are asked of it."""
        boards, dice = np.asarray(state._board), np.asarray(state._dice)
        playable, played = np.asarray(state._playable_dice), np.asarray(state._played_dice_num)
        legal = np.asarray(state.legal_action_mask)
        actions = np.zeros(len(to_move), np.int32)
        for game in np.flatnonzero(to_move):
            actions[game] = self.library_action(game, boards[game], dice[game], playable[game], int(played[game]),
                                                legal[game]) + 1
        return actions
