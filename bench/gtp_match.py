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
score with the match komi, `moozi.play.go_rules.area_score`), which decides the
winner. It also records the engines' own view, from those that know the
commands: at each engine's first pass, the referee's score and every engine's
`final_score` (`at_first_pass`); at the end, every engine's `final_score`
(`final_scores`) and `final_status_list dead` (`dead_stones`): GNU Go's
dead-stone analysis. An engine loses the game when it resigns, answers
`genmove` with an illegal move, a failure or nothing (timeout, exit), or
refuses a legal move relayed to it; a crashed engine is restarted for the next
game. A move that repeats an earlier position ends the game as a draw, as in
OpenSpiel's go. The referee is `moozi.play.gtp_referee`, shared with `moozi eval
--opponent gnugo`.

Prints one line per game, then ONE JSON object on its last line:
{"games": N, "wins": {"A": .., "B": ..}, "draws": .., "engines": {...}, ...}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from moozi.errors import MooziError  # noqa: E402
from moozi.play.gtp_client import EngineFailure, GtpProcess  # noqa: E402,F401  (EngineFailure: for importers)
from moozi.play.gtp_referee import GameResult, first_passes, play_game  # noqa: E402


def run_match(commands: dict[str, str], games: int, *, board_size: int = 9, komi: float = 7.5,
              max_moves: int = 400, timeout: float = 300.0, seed: int | None = 0, verbose: bool = False,
              out=sys.stdout) -> dict:
    engines = {label: GtpProcess(command, timeout) for label, command in commands.items()}
    results: list[GameResult] = []
    start = time.monotonic()
    try:
        for engine in engines.values():
            try:
                engine.start()
            except MooziError as e:
                raise SystemExit(f"gtp_match: {e}") from None
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
        "results": [{**{k: v for k, v in dataclasses.asdict(r).items() if k not in ("record", "forced", "board")},
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
