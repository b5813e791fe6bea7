"""A go agent against GNU Go through GTP: `moozi eval RUN --opponent gnugo[:LEVEL]` (docs/go.md).

The agent plays in this process behind its GTP engine (`moozi.play.gtp`, the
engine `moozi gtp` serves, through `LocalEngine`); GNU Go runs as a subprocess
(`gnugo --mode gtp --boardsize N --level L --chinese-rules --capture-all-dead`,
the komi of the agent's game, `set_random_seed SEED + game`). The referee
(`moozi.play.gtp_referee`) decides each game on its own board by the
Tromp–Taylor count, as OpenSpiel's go and the agent's training do; the agent
takes black in games 1, 3, 5, ...

Tromp–Taylor counts every stone on the board as alive, so a lost position can
still end with a small margin (dead stones GNU Go left standing count), and a
margin says little without GNU Go's own reading. Each game therefore also
records GNU Go's `final_score` (its dead-stone analysis, Chinese counting) at
the end and at GNU Go's first pass, and the agent's own area: its stones plus
the empty regions that reach only its colour, on the final board as it stands
(Tromp–Taylor) and with the stones GNU Go's `final_status_list dead` names
removed. All margins are from the agent's side: positive where it is ahead.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
from typing import Callable

from moozi.envs.twins import openspiel_twin
from moozi.errors import MooziError
from moozi.evaluation.matches import EvalResult, SeatRecord
from moozi.play.go_rules import area, parse_score, parse_vertex
from moozi.play.gtp_client import GtpProcess, LocalEngine
from moozi.play.gtp_referee import GameResult, play_game

__all__ = ["GNUGO", "GnugoGame", "GnugoResult", "evaluate_against_gnugo", "gnugo_command", "gnugo_level"]

GNUGO = "/usr/games/gnugo"  # Debian's gnugo package
DEFAULT_LEVEL = 1
_LEVELS = range(0, 11)  # GNU Go's --level
AGENT, OPPONENT = "agent", "gnugo"  # the referee's engine labels


def gnugo_level(spec: str) -> int | None:
    """The level of a `gnugo[:LEVEL]` opponent spec; None for any other opponent."""
    kind, sep, argument = spec.strip().partition(":")
    if kind.strip().lower() != "gnugo":
        return None
    if not sep:
        return DEFAULT_LEVEL
    if not argument.strip().isdigit() or int(argument) not in _LEVELS:
        raise MooziError(f"gnugo:LEVEL needs GNU Go's level, an integer from 0 to 10 (e.g. gnugo:1); got {spec!r}")
    return int(argument)


def gnugo_command(board_size: int, level: int, binary: str = GNUGO) -> str:
    return f"{binary} --mode gtp --boardsize {board_size} --level {level} --chinese-rules --capture-all-dead"


@dataclasses.dataclass(frozen=True)
class GnugoGame:
    """One game, from the agent's side."""

    agent_colour: str  # "black" or "white"
    outcome: str  # "win", "draw" or "loss" by the referee
    reason: str  # how it ended: "two passes", "move cap (400)", "gnugo resigned", ...
    moves: int
    first_pass: str | None  # who passed first ("agent" or "gnugo"; None: nobody passed)
    margin_tromp_taylor: float | None  # the referee's count; None where no count decided the game
    margin_gnugo: float | None  # GNU Go's final_score at the end (dead stones removed)
    at_gnugo_pass: dict | None  # at GNU Go's first pass: move, margin_tromp_taylor, margin_gnugo
    agent_area_tromp_taylor: int  # the agent's area on the final board as it stands
    agent_area_gnugo: int | None  # the same with GNU Go's dead stones removed
    record: tuple[str, ...]  # "B D4", "W pass", ...


def _margin(score: str | None, sign: int) -> float | None:
    if score is None:
        return None
    try:
        return sign * parse_score(score)
    except ValueError:
        return None  # an engine's answer that is no score


def game_from_result(r: GameResult) -> GnugoGame:
    sign = 1 if r.black == AGENT else -1
    winner = {AGENT: "win", OPPONENT: "loss", None: "draw"}[r.winner]
    passes = [entry for entry in r.record if entry.endswith(" pass")]
    first_pass = None if not passes else (r.black if passes[0].startswith("B") else r.white)
    at_pass = r.at_first_pass.get(OPPONENT)
    if at_pass is not None:
        at_pass = {"move": at_pass["move"], "margin_tromp_taylor": _margin(at_pass["score"], sign),
                   "margin_gnugo": _margin(at_pass["final_scores"].get(OPPONENT), sign)}
    area_gnugo = None
    if OPPONENT in r.dead_stones:
        cleaned = r.board.copy()
        for vertex in r.dead_stones[OPPONENT]:
            row, col = parse_vertex(vertex)
            cleaned[row, col] = 0
        area_gnugo = area(cleaned, sign)
    return GnugoGame(
        agent_colour="black" if sign == 1 else "white", outcome=winner, reason=r.reason, moves=r.moves,
        first_pass=first_pass, margin_tromp_taylor=_margin(r.score, sign),
        margin_gnugo=_margin(r.final_scores.get(OPPONENT), sign), at_gnugo_pass=at_pass,
        agent_area_tromp_taylor=area(r.board, sign), agent_area_gnugo=area_gnugo, record=tuple(r.record),
    )


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(statistics.median(values)) if values else None


@dataclasses.dataclass(frozen=True)
class GnugoResult:
    """Wins, draws and losses per colour (`result`, player 0 is black) and every game's margins."""

    result: EvalResult
    level: int
    command: str
    games: tuple[GnugoGame, ...]

    @property
    def summary(self) -> dict:
        return {
            "median_margin_tromp_taylor": _median(g.margin_tromp_taylor for g in self.games),
            "median_margin_gnugo": _median(g.margin_gnugo for g in self.games),
            "games_with_own_area_tromp_taylor": sum(g.agent_area_tromp_taylor > 0 for g in self.games),
            "games_with_own_area_gnugo": sum((g.agent_area_gnugo or 0) > 0 for g in self.games),
            "agent_passed_first": sum(g.first_pass == AGENT for g in self.games),
        }

    def to_json(self) -> str:
        data = {**dataclasses.asdict(self.result), "level": self.level, "command": self.command,
                "summary": self.summary, "per_game": [dataclasses.asdict(g) for g in self.games]}
        return json.dumps(data, indent=2)

    def format_table(self) -> str:
        def number(value):
            return "-" if value is None else f"{value:+g}"

        rows = [self.result.format_table(), "",
                f"{'game':>4} {'agent':<6} {'result':<6} {'moves':>5} {'1st pass':<8} {'TT':>7} {'GNU Go':>7} "
                f"{'TT@pass':>8} {'GG@pass':>8} {'area TT':>7} {'area GG':>7}"]
        for i, g in enumerate(self.games, start=1):
            at = g.at_gnugo_pass or {}
            rows.append(f"{i:>4} {g.agent_colour:<6} {g.outcome:<6} {g.moves:>5} {g.first_pass or '-':<8} "
                        f"{number(g.margin_tromp_taylor):>7} {number(g.margin_gnugo):>7} "
                        f"{number(at.get('margin_tromp_taylor')):>8} {number(at.get('margin_gnugo')):>8} "
                        f"{g.agent_area_tromp_taylor:>7} {'-' if g.agent_area_gnugo is None else g.agent_area_gnugo:>7}")
        s = self.summary
        rows.append(f"margins from the agent's side (TT: Tromp–Taylor, GG: GNU Go's final_score; @pass: at GNU Go's "
                    f"first pass); median TT {number(s['median_margin_tromp_taylor'])}, GNU Go "
                    f"{number(s['median_margin_gnugo'])}; own area > 0 in {s['games_with_own_area_tromp_taylor']} "
                    f"games (TT), {s['games_with_own_area_gnugo']} (GNU Go's dead stones removed); "
                    f"the agent passed first in {s['agent_passed_first']}")
        return "\n".join(rows)


def evaluate_against_gnugo(agent, num_games: int, seed: int, level: int = DEFAULT_LEVEL, *, max_moves: int = 400,
                           timeout: float = 300.0, binary: str = GNUGO,
                           log: Callable[[str], None] | None = None) -> GnugoResult:
    """`num_games` games of the agent (`load_agent(...)`, a go run) against GNU Go at `level`, colours
    alternating (the agent black first); `log(line)` after each game."""
    from moozi.play.gtp import engine_for_agent

    if isinstance(num_games, bool) or not isinstance(num_games, int) or num_games < 1:
        raise MooziError(f"the number of games must be a positive integer, got {num_games!r}")
    name = openspiel_twin(agent.spec.name) or agent.spec.name
    if not name.startswith("openspiel:go"):
        raise MooziError(f"--opponent gnugo plays go; this run plays {agent.spec.name}")
    if not os.path.exists(binary):
        raise MooziError(f"GNU Go is not installed ({binary} is missing): it is Debian's gnugo package, "
                         "`apt-get install gnugo`")
    local = engine_for_agent(agent)
    command = gnugo_command(local.board_size, level, binary)
    engines = {AGENT: LocalEngine(local), OPPONENT: GtpProcess(command, timeout)}
    games: list[GnugoGame] = []
    try:
        engines[OPPONENT].start()
        for i in range(num_games):
            if engines[OPPONENT].broken or not engines[OPPONENT].alive():
                engines[OPPONENT].restart()
            black, white = (AGENT, OPPONENT) if i % 2 == 0 else (OPPONENT, AGENT)
            r = play_game(engines, black, white, board_size=local.board_size, komi=local.komi,
                          max_moves=max_moves, seed=seed + i)
            games.append(game_from_result(r))
            if log is not None:
                g = games[-1]
                log(f"game {i + 1}: agent {g.agent_colour}: {g.outcome} {r.score or ''} after {g.moves} moves "
                    f"({g.reason}); GNU Go's count {r.final_scores.get(OPPONENT, '-')}")
    finally:
        engines[OPPONENT].close()
    per_seat = []
    for seat, colour in ((0, "black"), (1, "white")):
        mine = [g.outcome for g in games if g.agent_colour == colour]
        per_seat.append(SeatRecord(seat, len(mine), mine.count("win"), mine.count("draw"), mine.count("loss")))
    result = EvalResult.from_seats(game=name, opponent=f"gnugo:{level}", seed=seed, per_seat=tuple(per_seat))
    result = dataclasses.replace(result, simulations=getattr(agent, "simulations", None))
    return GnugoResult(result, level, command, tuple(games))
