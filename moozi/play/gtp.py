"""A GTP version 2 engine over OpenSpiel's go: `moozi gtp RUN` (docs/go.md).

`GtpEngine.respond(line)` maps one input line to its full response text (or
"" for a line the protocol ignores); `serve` is the thin stdin/stdout loop. The
engine holds the GTP move list and the OpenSpiel state it leads to; the moves
it generates come from a `player`: a function from a state to an action
(`agent_player` wraps a trained agent's `pyspiel.Bot`s).

Protocol choices, where GTP leaves room:
- Responses are `=[id] result\\n\\n` and `?[id] message\\n\\n` with one space
  after the marker even when the result is empty (`= \\n\\n`), as the reference
  engine (GNU Go) writes them. Command names are case-sensitive; colours and
  vertices are not.
- Only the board size of the trained game is acceptable; `komi` recreates the
  OpenSpiel game with the new komi (a game parameter there) and replays the moves.
- GTP allows two moves in a row by one colour, OpenSpiel's go does not: the
  engine inserts a pass for the other colour, and `undo` takes back the move
  together with that pass. Right after a pass, the inserted pass would be the
  second in a row, which ends an OpenSpiel game: there a stone is refused with
  `? cannot play twice in a row after a pass`.
- The game ends after two consecutive passes (as in OpenSpiel and the
  Tromp–Taylor rules): later stones are refused with `? the game is over`
  until `undo`, `clear_board` or `boardsize`.
- A pass that OpenSpiel cannot represent (in those two cases) changes nothing
  on the board, so it is accepted and recorded without touching OpenSpiel's
  state; `genmove` answers `pass` there, so it fails (`? cannot generate a
  move: ...`) only when the player itself fails.
- `play` answers `? illegal move` for an occupied point, suicide, a ko
  recapture, a move repeating an earlier position (positional superko), and a
  vertex that is well formed but off the board; malformed input is `? syntax error`.
- `genmove` never resigns; when the player's move would repeat a position the
  engine passes instead.
- `final_score` is the Tromp–Taylor area score of the current board with the
  current komi (`moozi.play.go_rules.area_score`), whether or not the game is over.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import BinaryIO, Callable

import pyspiel

from moozi._version import __version__
from moozi.envs.twins import openspiel_twin
from moozi.errors import MooziError
from moozi.play.go_rules import (
    GAME_OVER,
    REPEATS_POSITION,
    VertexSyntaxError,
    action_to_vertex,
    area_score,
    board_array,
    format_score,
    go_parameters,
    new_go_game,
    parse_colour,
    parse_vertex,
    play_move,
    point_to_action,
)

__all__ = ["COMMANDS", "GtpEngine", "serve", "agent_player", "engine_for_agent"]

COMMANDS = (
    "protocol_version",
    "name",
    "version",
    "known_command",
    "list_commands",
    "boardsize",
    "clear_board",
    "komi",
    "play",
    "genmove",
    "undo",
    "final_score",
    "quit",
)

Player = Callable[[pyspiel.State], int]  # state (not terminal) -> action for its current player


class _Failure(Exception):
    """A command that fails: the message goes into `? message`."""


@dataclasses.dataclass(frozen=True)
class _Move:
    colour: int  # BLACK or WHITE
    action: int  # OpenSpiel action (N * N is the pass)
    on_board: bool = True  # False: a pass recorded for `undo` only (OpenSpiel could not take it)


def _preprocess(line: str) -> str:
    """GTP 3.1: drop control characters but HT and LF, cut `#` comments, HT to space."""
    kept = "".join(ch for ch in line if ch in "\t\n" or (ord(ch) >= 32 and ord(ch) != 127))
    return kept.split("#", 1)[0].replace("\t", " ")


class GtpEngine:
    """The GTP state machine: one board, its move list, komi and a move generator."""

    def __init__(self, *, board_size: int, komi: float, player: Player, name: str = "moozi",
                 version: str = __version__):
        self.board_size = board_size
        self.komi = float(komi)
        self.name = name
        self.version = version
        self.finished = False  # set by `quit`
        self._player = player
        # Long enough that OpenSpiel's length cut never ends a game a controller is still playing.
        self._max_length = 10 * board_size * board_size
        self._moves: list[_Move] = []
        self._game = new_go_game(board_size, self.komi, self._max_length)
        self.state = self._game.new_initial_state()
        self._handlers = {name: getattr(self, f"_cmd_{name}") for name in COMMANDS}

    # ------------------------------------------------------------- protocol
    def respond(self, line: str) -> str:
        """The full response to one input line ("" when the line is empty after preprocessing)."""
        # GTP's only separators are space and tab (already a space here), not every Unicode space.
        words = [word for word in _preprocess(line).rstrip("\n").split(" ") if word]
        if not words:
            return ""
        ident = ""
        if words[0].isdigit() and words[0].isascii():
            ident, words = words[0], words[1:]
        try:
            if not words:
                raise _Failure("syntax error")
            handler = self._handlers.get(words[0])
            if handler is None:
                raise _Failure("unknown command")
            result = handler(words[1:])
        except _Failure as failure:
            return f"?{ident} {failure}\n\n"
        return f"={ident} {result}\n\n"

    # ------------------------------------------------------------- commands
    def _cmd_protocol_version(self, args):
        _arity(args, 0)
        return "2"

    def _cmd_name(self, args):
        _arity(args, 0)
        return self.name

    def _cmd_version(self, args):
        _arity(args, 0)
        return self.version

    def _cmd_known_command(self, args):
        _arity(args, 1)
        return "true" if args[0] in self._handlers else "false"

    def _cmd_list_commands(self, args):
        _arity(args, 0)
        return "\n".join(COMMANDS)

    def _cmd_boardsize(self, args):
        _arity(args, 1)
        size = _integer(args[0])
        if size != self.board_size:
            raise _Failure("unacceptable size")
        self._reset([])
        return ""

    def _cmd_clear_board(self, args):
        _arity(args, 0)
        self._reset([])
        return ""

    def _cmd_komi(self, args):
        _arity(args, 1)
        try:
            komi = float(args[0])
        except ValueError:
            raise _Failure("syntax error") from None
        if not math.isfinite(komi):
            raise _Failure("syntax error")
        self.komi = komi
        self._game = new_go_game(self.board_size, komi, self._max_length)
        self._reset(self._moves)
        return ""

    def _cmd_play(self, args):
        _arity(args, 2)
        try:
            colour = parse_colour(args[0])
            point = parse_vertex(args[1])
        except VertexSyntaxError:
            raise _Failure("syntax error") from None
        action = point_to_action(point, self.board_size)
        if action is None:
            raise _Failure("illegal move")
        state = self._to_move(colour)
        if state is None:
            if action != self._pass:
                raise _Failure(GAME_OVER if self.state.is_terminal() else "cannot play twice in a row after a pass")
            self._moves.append(_Move(colour, action, on_board=False))
            return ""
        reason = play_move(state, action)
        if reason is not None:
            raise _Failure("illegal move")
        self._commit(state, _Move(colour, action))
        return ""

    def _cmd_genmove(self, args):
        _arity(args, 1)
        try:
            colour = parse_colour(args[0])
        except VertexSyntaxError:
            raise _Failure("syntax error") from None
        state = self._to_move(colour)
        if state is None:
            self._moves.append(_Move(colour, self._pass, on_board=False))
            return "pass"
        try:
            action = int(self._player(state.clone()))
        except MooziError as error:
            raise _Failure(f"cannot generate a move: {error}") from None
        reason = play_move(state, action)
        if reason == REPEATS_POSITION:
            # OpenSpiel lists such a move as legal (it would end the game as a draw): pass instead.
            action = self._pass
            reason = play_move(state, action)
        if reason is not None:
            chosen = action_to_vertex(action, self.board_size)
            raise _Failure(f"cannot generate a move: the player chose {chosen}, {reason}")
        self._commit(state, _Move(colour, action))
        return action_to_vertex(action, self.board_size)

    def _cmd_undo(self, args):
        _arity(args, 0)
        if not self._moves:
            raise _Failure("cannot undo")
        self._reset(self._moves[:-1])
        return ""

    def _cmd_final_score(self, args):
        _arity(args, 0)
        return format_score(area_score(board_array(self.state, self.board_size), self.komi))

    def _cmd_quit(self, args):
        _arity(args, 0)
        self.finished = True
        return ""

    # ------------------------------------------------------------- position
    @property
    def _pass(self) -> int:
        return self.board_size * self.board_size

    def _to_move(self, colour: int) -> pyspiel.State | None:
        """A copy of the state with `colour` to move, a pass inserted for the other colour if needed.

        None when OpenSpiel cannot get there: the game is over, or the inserted
        pass would follow a pass (and so end the game).
        """
        state = self.state.clone()
        if state.is_terminal():
            return None
        if state.current_player() != colour:
            history = state.history()
            if history and history[-1] == self._pass:
                return None
            state.apply_action(self._pass)
        return state

    def _commit(self, state: pyspiel.State, move: _Move) -> None:
        self.state = state
        self._moves.append(move)

    def _reset(self, moves: list[_Move]) -> None:
        """Replays `moves` (legal when first played) on a fresh board of the current game."""
        replayed = list(moves)
        self._moves, self.state = [], self._game.new_initial_state()
        for move in replayed:
            if not move.on_board:
                self._moves.append(move)
                continue
            state = self._to_move(move.colour)
            play_move(state, move.action)
            self._commit(state, move)


def _arity(args: list[str], count: int) -> None:
    if len(args) != count:
        raise _Failure("syntax error")


def _integer(text: str) -> int:
    if not (text.isdigit() and text.isascii()):
        raise _Failure("syntax error")
    return int(text)


def serve(engine: GtpEngine, instream: BinaryIO, outstream: BinaryIO) -> None:
    """Answers GTP commands from `instream` until `quit` or end of input."""
    for raw in instream:
        response = engine.respond(raw.decode("utf-8", errors="replace"))
        if response:
            outstream.write(response.encode("utf-8"))
            outstream.flush()
        if engine.finished:
            return


# ------------------------------------------------------------------ the agent
def agent_player(agent) -> Player:
    """A trained agent's greedy search as a `Player` (one OpenSpiel bot per colour)."""
    bots = [agent.as_openspiel_bot(player_id) for player_id in (0, 1)]
    return lambda state: bots[state.current_player()].step(state)


def engine_for_agent(agent) -> GtpEngine:
    """A GTP engine for an agent trained on OpenSpiel's go, or on its pgx twin (AlphaZero mode: the
    engine keeps the OpenSpiel game and the bot replays it in pgx); board size and komi come from the game."""
    name = openspiel_twin(agent.spec.name) or agent.spec.name
    params = go_parameters(pyspiel.load_game(name.split(":", 1)[1])) if name.startswith("openspiel:") else None
    if params is None:
        raise MooziError(
            f"moozi gtp needs a run trained on OpenSpiel's go or its pgx twin (e.g. go9); this run plays {agent.spec.name}"
        )
    board_size, komi = params
    return GtpEngine(board_size=board_size, komi=komi, player=agent_player(agent))


def run_gtp(agent) -> None:
    """`moozi gtp`: serves GTP on the process's stdin/stdout."""
    engine = engine_for_agent(agent)
    protocol_out = sys.stdout.buffer
    # Anything a library prints would corrupt the protocol stream: send it to stderr.
    sys.stdout = sys.stderr
    try:
        serve(engine, sys.stdin.buffer, protocol_out)
    finally:
        sys.stdout = sys.__stdout__
