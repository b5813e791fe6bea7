"""Go on OpenSpiel's board, in GTP's terms: vertices, actions, moves and the area score.

Shared by the GTP engine (`moozi/play/gtp.py`) and the match referee
(`bench/gtp_match.py`), so both read vertices and score positions the same way.

- OpenSpiel's go numbers point (row r, column c) as action `r * N + c`, with row
  0 at the bottom, and `N * N` is the pass. GTP's vertex `D4` is column D
  (letters from A, skipping I) and row 4 counted from the bottom, so `A1` is
  action 0 and rows need no flipping (`state.action_to_string` agrees: "B a1").
- A non-pass move that repeats an earlier board position (positional superko)
  makes OpenSpiel end the game as a draw; `play_move` refuses it instead, as the
  Tromp–Taylor rules do, so a position never ends that way by accident.
- `area_score` is Tromp–Taylor: stones plus empty regions that reach only one
  colour, black minus white minus komi; OpenSpiel's own returns are its sign.
  `area` is one colour's share of it.
- `own_eyes`: single-point eyes, the points a player never needs to fill
  (`planner.play_pass_rule = "no_eye_fill"`, moozi/play/pass_rule.py).
"""

from __future__ import annotations

import math

import numpy as np
import pyspiel

__all__ = [
    "COLUMNS",
    "MAX_VERTEX_SIZE",
    "BLACK",
    "WHITE",
    "VertexSyntaxError",
    "parse_colour",
    "parse_vertex",
    "point_to_action",
    "action_to_vertex",
    "new_go_game",
    "go_parameters",
    "board_array",
    "area_score",
    "area",
    "own_eyes",
    "parse_score",
    "format_score",
    "play_move",
    "repeats_position",
    "ILLEGAL",
    "REPEATS_POSITION",
    "GAME_OVER",
]

COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"  # GTP column letters: I is skipped
MAX_VERTEX_SIZE = 25  # GTP's largest board; OpenSpiel's go stops at 19
BLACK, WHITE = 0, 1  # OpenSpiel's players
# Why `play_move` refused a move.
ILLEGAL = "illegal move"
REPEATS_POSITION = "illegal move (repeats an earlier position)"
GAME_OVER = "the game is over"
_COLOURS = {"b": BLACK, "black": BLACK, "w": WHITE, "white": WHITE}


class VertexSyntaxError(ValueError):
    """Text that is no GTP colour or vertex at all (not merely off this board)."""


def parse_colour(text: str) -> int:
    try:
        return _COLOURS[text.lower()]
    except KeyError:
        raise VertexSyntaxError(f"not a colour: {text!r}") from None


def parse_vertex(text: str) -> tuple[int, int] | None:
    """GTP vertex -> (row, column) from the bottom-left, 0-based; None for pass. Case-insensitive."""
    text = text.upper()
    if text == "PASS":
        return None
    letter, digits = text[:1], text[1:]
    if not letter or letter not in COLUMNS or not digits.isdigit() or not digits.isascii():
        raise VertexSyntaxError(f"not a vertex: {text!r}")
    row = int(digits)
    if not 1 <= row <= MAX_VERTEX_SIZE:
        raise VertexSyntaxError(f"not a vertex: {text!r}")
    return row - 1, COLUMNS.index(letter)


def point_to_action(point: tuple[int, int] | None, board_size: int) -> int | None:
    """OpenSpiel action of a point (pass for None); None when the point is off this board."""
    if point is None:
        return board_size * board_size
    row, col = point
    if row >= board_size or col >= board_size:
        return None
    return row * board_size + col


def action_to_vertex(action: int, board_size: int) -> str:
    if action == board_size * board_size:
        return "pass"
    row, col = divmod(int(action), board_size)
    return f"{COLUMNS[col]}{row + 1}"


def new_go_game(board_size: int, komi: float, max_game_length: int) -> pyspiel.Game:
    """OpenSpiel's go with these settings (parameters typed, so komi 7 is the double 7.0)."""
    return pyspiel.load_game(
        "go", {"board_size": int(board_size), "komi": float(komi), "max_game_length": int(max_game_length)}
    )


def go_parameters(game: pyspiel.Game) -> tuple[int, float] | None:
    """(board size, komi) of an OpenSpiel go game; None for any other game."""
    if game.get_type().short_name != "go":
        return None
    params = game.get_parameters()
    return int(params["board_size"]), float(params["komi"])


def board_array(state: pyspiel.State, board_size: int) -> np.ndarray:
    """[row, column] from the bottom-left: +1 black stone, -1 white stone, 0 empty."""
    planes = np.asarray(state.observation_tensor(0), np.float32).reshape(-1, board_size, board_size)
    return planes[0].astype(np.int8) - planes[1].astype(np.int8)  # planes: black, white, empty, to-play


def _regions(board: np.ndarray):
    """Each empty region of the board: (its size, the set of stone colours, +1/-1, it reaches)."""
    n_rows, n_cols = board.shape
    seen = board != 0
    for start in zip(*np.nonzero(~seen)):
        if seen[start]:
            continue
        seen[start] = True
        stack, size, reached = [start], 0, set()
        while stack:
            row, col = stack.pop()
            size += 1
            for r, c in ((row + 1, col), (row - 1, col), (row, col + 1), (row, col - 1)):
                if 0 <= r < n_rows and 0 <= c < n_cols:
                    if board[r, c]:
                        reached.add(int(board[r, c]))
                    elif not seen[r, c]:
                        seen[r, c] = True
                        stack.append((r, c))
        yield size, reached


def area_score(board: np.ndarray, komi: float) -> float:
    """Tromp–Taylor area score, black minus white minus komi."""
    return area(board, 1) - area(board, -1) - komi


def area(board: np.ndarray, sign: int) -> int:
    """Tromp–Taylor area of one colour (+1 black, -1 white): its stones plus the empty regions that
    reach only its stones."""
    regions = sum(size for size, reached in _regions(board) if reached == {sign})
    return int(np.sum(board == sign)) + regions


def own_eyes(board: np.ndarray, sign: int) -> np.ndarray:
    """[row, column] bool: the true single-point eyes of `sign` (+1 black, -1 white): empty points whose
    every on-board orthogonal neighbour is a stone of `sign`, and whose diagonals the opponent does not
    hold enough of to make the eye false (two of four in the middle of the board, one on the edge or in
    the corner: the playout rule of Go programs since GNU Go's Monte Carlo mode and Pachi). Filling a
    true eye only takes a liberty from the player's own group, and a group that fills its last two
    dies; a false eye may have to be filled to connect, so the search keeps that choice."""
    own = np.pad(board == sign, 1, constant_values=True)  # off the board counts as surrounded
    surrounded = own[:-2, 1:-1] & own[2:, 1:-1] & own[1:-1, :-2] & own[1:-1, 2:]
    theirs = np.pad(board == -sign, 1, constant_values=False).astype(np.int8)
    on_board = np.pad(np.ones(board.shape, np.int8), 1)
    held = theirs[:-2, :-2] + theirs[:-2, 2:] + theirs[2:, :-2] + theirs[2:, 2:]
    diagonals = on_board[:-2, :-2] + on_board[:-2, 2:] + on_board[2:, :-2] + on_board[2:, 2:]
    false = (held >= 2) | ((diagonals < 4) & (held >= 1))
    return (board == 0) & surrounded & ~false


def format_score(score: float) -> str:
    """GTP's final_score text: `B+3.5`, `W+0.5`, `0` for a tie."""
    if score == 0:
        return "0"
    margin = abs(score)
    text = str(int(margin)) if margin == math.floor(margin) else format(margin, ".10g")
    return f"{'B' if score > 0 else 'W'}+{text}"


def parse_score(text: str) -> float:
    """GTP's final_score text (`B+3.5`, `W+0.5`, `0`) as black minus white; ValueError for anything else."""
    text = text.strip().upper()
    if text == "0":
        return 0.0
    colour, plus, margin = text.partition("+")
    if colour not in ("B", "W") or not plus:
        raise ValueError(f"not a GTP score: {text!r}")
    return float(margin) if colour == "B" else -float(margin)


def repeats_position(state: pyspiel.State, action: int) -> bool:
    """Whether the legal `action` is a stone that recreates an earlier board (OpenSpiel ends the game
    there as a draw, before its length limit; Tromp–Taylor's positional superko forbids it)."""
    if action == state.num_distinct_actions() - 1:
        return False
    child = state.child(action)
    return child.is_terminal() and len(child.history()) < state.get_game().max_game_length()


def play_move(state: pyspiel.State, action: int) -> str | None:
    """Applies `action` for the player to move, or returns why not (ILLEGAL, REPEATS_POSITION, GAME_OVER)."""
    if state.is_terminal():
        return GAME_OVER
    if action not in state.legal_actions():
        return ILLEGAL
    if repeats_position(state, action):
        return REPEATS_POSITION
    state.apply_action(action)
    return None
