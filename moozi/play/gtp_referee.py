"""One game of go between two GTP engines, refereed on an OpenSpiel go state.

The referee sends `boardsize`, `komi`, `clear_board` (and `set_random_seed`
to an engine that knows it), asks the side to move for `genmove`, checks the
move on its own board and relays it with `play`. A game ends after two
consecutive passes, a resignation, or `max_moves` moves, and is scored on the
referee's board (Tromp–Taylor, `go_rules.area_score`). An engine loses when it
resigns, answers `genmove` with an illegal move, a failure or nothing, or
refuses a legal move relayed to it. A move that repeats an earlier position
ends the game as a draw, as in OpenSpiel's go.

Beside its own score the referee records what the engines think (an engine
is asked only the commands it knows): at each engine's first pass, the
Tromp–Taylor score then and every engine's `final_score`; after a game that
ended by the rules, every engine's `final_score` and `final_status_list dead`.
GNU Go answers these with its dead-stone analysis, which says who owns the
board when Tromp–Taylor's count of every stone as alive does not.

Used by bench/gtp_match.py (two engine commands) and `moozi eval --opponent
gnugo` (an agent in this process against GNU Go).
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

from moozi.play.go_rules import (
    REPEATS_POSITION,
    VertexSyntaxError,
    action_to_vertex,
    area_score,
    board_array,
    format_score,
    new_go_game,
    parse_vertex,
    play_move,
    point_to_action,
    repeats_position,
)
from moozi.play.gtp_client import Engine, EngineFailure

__all__ = ["GameResult", "play_game", "first_passes"]

_COLOUR_NAMES = ("b", "w")


@dataclasses.dataclass
class GameResult:
    black: str  # engine label, e.g. "A" or "B"
    white: str
    winner: str | None  # engine label, None for a draw
    score: str | None  # the referee's area score (B+x / W+x / 0); None when the game did not reach scoring
    moves: int
    reason: str
    record: list[str]  # "B D4", "W pass", ...
    forced: list[int] = dataclasses.field(default_factory=list)  # move numbers of passes with no legal stone
    # Per engine label, at its first pass (chosen or not), after the other engine took it: the move
    # number, the referee's score then, and each engine's `final_score` then. None: it never passed.
    at_first_pass: dict[str, dict | None] = dataclasses.field(default_factory=dict)
    final_scores: dict[str, str] = dataclasses.field(default_factory=dict)  # label -> its final_score at the end
    dead_stones: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # label -> final_status_list dead
    board: np.ndarray | None = None  # the referee's final board (go_rules.board_array), for the caller


class _Failed(Exception):
    def __init__(self, label: str, failure: EngineFailure):
        super().__init__(f"{label} failed: {failure}")
        self.label, self.failure = label, failure


def _ask(engines: dict[str, Engine], command: str) -> dict[str, str]:
    """Each engine's answer to `command`, from those that know it and answer it without an error."""
    answers = {}
    for label, engine in engines.items():
        try:
            if engine.knows(command.split()[0]):
                ok, text = engine.send(command)
                if ok:
                    answers[label] = text
        except EngineFailure as e:
            raise _Failed(label, e) from None
    return answers


def play_game(engines: dict[str, Engine], black: str, white: str, *, board_size: int, komi: float,
              max_moves: int, seed: int | None, verbose: bool = False) -> GameResult:
    """One game refereed on an OpenSpiel go state; `engines` maps the two labels to engines."""
    labels = (black, white)
    record: list[str] = []
    forced: list[int] = []
    at_first_pass: dict[str, dict | None] = {black: None, white: None}
    state = new_go_game(board_size, komi, max_moves + 2).new_initial_state()

    def result(winner, score, reason, **scores):
        return GameResult(black, white, winner, score, len(record), reason, record, forced, at_first_pass,
                          board=board_array(state, board_size), **scores)

    def other(label):
        return white if label == black else black

    for label in labels:
        setup = [f"boardsize {board_size}", f"komi {komi:g}", "clear_board"]
        try:
            if seed is not None and engines[label].knows("set_random_seed"):
                setup.append(f"set_random_seed {seed}")
            for command in setup:
                ok, text = engines[label].send(command)
                if not ok:
                    return result(other(label), None, f"{label} refused `{command}`: {text}")
        except EngineFailure as e:
            return result(other(label), None, f"{label} failed during setup: {e}")

    pass_action = board_size * board_size
    passes = 0
    for number in range(max_moves):
        colour = number % 2
        mover, receiver = labels[colour], labels[1 - colour]
        name = _COLOUR_NAMES[colour]
        try:
            ok, text = engines[mover].send(f"genmove {name}")
        except EngineFailure as e:
            return result(receiver, None, f"{mover} failed at genmove: {e}")
        if not ok:
            return result(receiver, None, f"{mover} answered genmove with `? {text}`")
        answer = text.strip().lower()
        if answer == "resign":
            return result(receiver, None, f"{mover} resigned")
        try:
            action = point_to_action(parse_vertex(answer), board_size)
        except VertexSyntaxError:
            action = None
        if action is None:
            return result(receiver, None, f"{mover} answered genmove with {text.strip()!r}")
        vertex = action_to_vertex(action, board_size)
        if action == pass_action and not any(
                a != pass_action and not repeats_position(state, a) for a in state.legal_actions()):
            forced.append(len(record) + 1)  # every empty point was suicide or a repeat: no choice
        reason = play_move(state, action)
        if reason == REPEATS_POSITION:
            record.append(f"{name.upper()} {vertex}")
            return result(None, None, f"{mover}'s {vertex} repeats an earlier position (a draw, as in OpenSpiel)")
        if reason is not None:
            return result(receiver, None, f"{mover} played {vertex}: {reason}")
        record.append(f"{name.upper()} {vertex}")
        if verbose:
            print(f"  {len(record)}. {mover} ({name.upper()}) {vertex}", file=sys.stderr, flush=True)
        try:
            ok, text = engines[receiver].send(f"play {name} {vertex}")
        except EngineFailure as e:
            return result(mover, None, f"{receiver} failed at play: {e}")
        if not ok:
            return result(mover, None, f"{receiver} refused the legal move {name} {vertex}: {text}")
        passes = passes + 1 if action == pass_action else 0
        if action == pass_action and at_first_pass[mover] is None:
            score = format_score(area_score(board_array(state, board_size), komi))
            try:
                at_first_pass[mover] = {"move": len(record), "score": score, "final_scores": _ask(engines, "final_score")}
            except _Failed as f:
                return result(other(f.label), None, f"{f.label} failed at final_score: {f.failure}")
        if passes == 2:
            break
    score = area_score(board_array(state, board_size), komi)
    winner = black if score > 0 else white if score < 0 else None
    reason = "two passes" if passes == 2 else f"move cap ({max_moves})"
    try:
        final_scores = _ask(engines, "final_score")
        dead = {label: sorted(text.upper().split()) for label, text in _ask(engines, "final_status_list dead").items()}
    except _Failed:  # the game is decided; an engine that fails now only loses its opinion of it
        final_scores, dead = {}, {}
    return result(winner, format_score(score), reason, final_scores=final_scores, dead_stones=dead)


def first_passes(result: GameResult) -> dict[str, int | None]:
    """The move number (1-based) of each engine's first pass that it chose, None where it never chose
    one: a pass with no legal stone left (every empty point suicide or a repeat) is not a choice."""
    out: dict[str, int | None] = {result.black: None, result.white: None}
    for number, entry in enumerate(result.record, start=1):
        colour, vertex = entry.split()
        label = result.black if colour == "B" else result.white
        if vertex == "pass" and number not in result.forced and out[label] is None:
            out[label] = number
    return out
