"""Plays games of go between two GTP engines, with its own referee.

    python bench/gtp_match.py --games N "ENGINE A COMMAND" "ENGINE B COMMAND"
        [--board-size 9] [--komi 7.5] [--max-moves 400] [--timeout 300] [--seed 0] [--verbose]

e.g. `python bench/gtp_match.py --games 10 "moozi gtp runs/go9"
"/usr/games/gnugo --mode gtp --boardsize 9 --level 1 --chinese-rules --capture-all-dead"`.

Both engines run as subprocesses for the whole match. Each game: `boardsize`,
`komi`, `clear_board` on both (and `set_random_seed SEED+game` to an engine
that knows the command, so a match can be repeated); A takes black in games 1,
3, 5, ..., B in the others. The referee asks the side to move for `genmove`,
checks the move on its own OpenSpiel go state and relays it with `play` to the
other engine. A game ends after two consecutive passes, a resignation, or
--max-moves moves; the referee then scores its own board (Tromp–Taylor area
score with the match komi, `moozi.play.go_rules.area_score`) and never asks the
engines for `final_score`. An engine loses the game when it resigns, answers
`genmove` with an illegal move, a failure or nothing (timeout, exit), or
refuses a legal move relayed to it; a crashed engine is restarted for the next
game. A move that repeats an earlier position ends the game as a draw, as in
OpenSpiel's go.

Prints one line per game, then ONE JSON object on its last line:
{"games": N, "wins": {"A": .., "B": ..}, "draws": .., "engines": {...}, ...}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import queue
import shlex
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from moozi.play.go_rules import (  # noqa: E402
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

_COLOUR_NAMES = ("b", "w")


class EngineFailure(Exception):
    """The engine exited, timed out or wrote something that is no GTP response."""


class GtpProcess:
    """One GTP engine as a subprocess: `send(command)` -> (success, response text)."""

    def __init__(self, command: str, timeout: float):
        self.command = command
        self.argv = shlex.split(command)
        self.timeout = timeout
        self._process: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        self._known: dict[str, bool] = {}
        self.broken = False  # a failure left the protocol stream in an unknown place: restart before reuse

    def start(self) -> None:
        try:
            self._process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as e:
            raise SystemExit(f"gtp_match: cannot start {self.command!r}: {e.strerror or e}") from None
        self._lines = queue.Queue()
        self.broken = False
        threading.Thread(target=self._read, args=(self._process.stdout, self._lines), daemon=True).start()

    @staticmethod
    def _read(stream, lines: queue.Queue) -> None:
        for raw in stream:
            lines.put(raw.decode("utf-8", errors="replace"))
        lines.put(None)  # end of output

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def restart(self) -> None:
        self.close()
        self.start()

    def send(self, command: str) -> tuple[bool, str]:
        try:
            return self._exchange(command)
        except EngineFailure:
            self.broken = True
            raise

    def _exchange(self, command: str) -> tuple[bool, str]:
        if not self.alive():
            raise EngineFailure("the engine is not running")
        try:
            self._process.stdin.write(command.encode() + b"\n")
            self._process.stdin.flush()
        except OSError:
            raise EngineFailure("the engine closed its input") from None
        deadline = time.monotonic() + self.timeout
        first = self._next_line(deadline)
        while not first.strip():  # blank lines between responses are harmless
            first = self._next_line(deadline)
        if first[0] not in "=?":
            raise EngineFailure(f"not a GTP response: {first.rstrip()!r}")
        body = [first[1:].lstrip("0123456789").strip()]
        while True:
            line = self._next_line(deadline)
            if not line.strip():
                return first[0] == "=", "\n".join(body).strip()
            body.append(line.rstrip("\r\n"))

    def knows(self, command: str) -> bool:
        if command not in self._known:
            ok, text = self.send(f"known_command {command}")
            self._known[command] = ok and text.strip() == "true"
        return self._known[command]

    def _next_line(self, deadline: float) -> str:
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise EngineFailure(f"no response within {self.timeout:g} s") from None
        if line is None:
            raise EngineFailure("the engine exited")
        return line

    def close(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            try:
                self._process.stdin.write(b"quit\n")
                self._process.stdin.flush()
                self._process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._process.kill()
                self._process.wait()
        self._process = None


@dataclasses.dataclass
class GameResult:
    black: str  # engine label, "A" or "B"
    white: str
    winner: str | None  # engine label, None for a draw
    score: str | None  # the referee's area score (B+x / W+x / 0); None when the game did not reach scoring
    moves: int
    reason: str
    record: list[str]  # "B D4", "W pass", ...
    forced: list[int] = dataclasses.field(default_factory=list)  # move numbers of passes with no legal stone


def play_game(engines: dict[str, GtpProcess], black: str, white: str, *, board_size: int, komi: float,
              max_moves: int, seed: int | None, verbose: bool = False) -> GameResult:
    """One game refereed on an OpenSpiel go state; engines are labelled "A"/"B"."""
    labels = (black, white)
    record: list[str] = []
    forced: list[int] = []

    def result(winner, score, reason):
        return GameResult(black, white, winner, score, len(record), reason, record, forced)

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

    state = new_go_game(board_size, komi, max_moves + 2).new_initial_state()
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
        if passes == 2:
            break
    score = area_score(board_array(state, board_size), komi)
    winner = black if score > 0 else white if score < 0 else None
    reason = "two passes" if passes == 2 else f"move cap ({max_moves})"
    return result(winner, format_score(score), reason)


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


def run_match(commands: dict[str, str], games: int, *, board_size: int = 9, komi: float = 7.5,
              max_moves: int = 400, timeout: float = 300.0, seed: int | None = 0, verbose: bool = False,
              out=sys.stdout) -> dict:
    engines = {label: GtpProcess(command, timeout) for label, command in commands.items()}
    results: list[GameResult] = []
    start = time.monotonic()
    try:
        for engine in engines.values():
            engine.start()
        for game in range(games):
            for engine in engines.values():
                if engine.broken or not engine.alive():
                    engine.restart()
            black, white = ("A", "B") if game % 2 == 0 else ("B", "A")
            r = play_game(engines, black, white, board_size=board_size, komi=komi, max_moves=max_moves,
                          seed=None if seed is None else seed + game, verbose=verbose)
            results.append(r)
            outcome = f"{r.winner} wins" if r.winner else "draw"
            score = f" {r.score}" if r.score else ""
            print(f"game {game + 1}: A {'black' if black == 'A' else 'white'}, B {'black' if black == 'B' else 'white'}: "
                  f"{outcome}{score} after {r.moves} moves ({r.reason})", file=out, flush=True)
    finally:
        for engine in engines.values():
            engine.close()
    wins = {label: sum(r.winner == label for r in results) for label in commands}
    return {
        "games": games,
        "wins": wins,
        "draws": sum(r.winner is None for r in results),
        "win_rate": {label: wins[label] / games for label in commands} if games else {},
        "engines": dict(commands),
        "board_size": board_size,
        "komi": komi,
        "max_moves": max_moves,
        "seed": seed,
        "results": [{**{k: v for k, v in dataclasses.asdict(r).items() if k not in ("record", "forced")},
                     "first_pass": first_passes(r), "forced_passes": len(r.forced)} for r in results],
        "seconds": round(time.monotonic() - start, 1),
        "load_average_1min": os.getloadavg()[0],
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine_a", help="command line of engine A (black in odd-numbered games)")
    parser.add_argument("engine_b", help="command line of engine B")
    parser.add_argument("--games", type=int, default=2)
    parser.add_argument("--board-size", type=int, default=9)
    parser.add_argument("--komi", type=float, default=7.5)
    parser.add_argument("--max-moves", type=int, default=400,
                        help="a game still going after this many moves is scored as it stands")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds an engine may take to answer one command")
    parser.add_argument("--seed", type=int, default=0,
                        help="game g sends `set_random_seed SEED+g` to engines that know it; -1: send none")
    parser.add_argument("--verbose", action="store_true", help="print every move to stderr as it is played")
    args = parser.parse_args(argv)
    if args.games < 1 or args.max_moves < 1 or args.timeout <= 0:
        parser.error("--games and --max-moves must be positive, --timeout above 0")
    report = run_match({"A": args.engine_a, "B": args.engine_b}, args.games, board_size=args.board_size,
                       komi=args.komi, max_moves=args.max_moves, timeout=args.timeout,
                       seed=None if args.seed < 0 else args.seed, verbose=args.verbose)
    print(f"A: {report['wins']['A']} wins, B: {report['wins']['B']} wins, {report['draws']} draws "
          f"in {args.games} games ({report['seconds']:.0f} s)")
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
