"""Makes moozi/evaluation/data/connect_four_positions.json: Connect Four positions labelled by the solver.

    python bench/make_connect_four_positions.py [--seed 0] [--per-phase 200] [--lost-per-phase 50] [--out PATH]

Needs the `[solvers]` extra. The positions are those that play reaches, not
random boards: games of OpenSpiel's MCTS (random rollouts) against itself and
against the perfect solver, with some moves replaced by random ones so that
the games spread out, plus games of uniformly random play. Every non-terminal
position of those games is a candidate; equal boards reached by different move
orders count once (the first move list is kept). The solver labels each one.
Positions where every legal move keeps the result are dropped (any mover
passes them, so they measure nothing), except some lost for the mover: those
are all of that kind, and a value estimate must be checked on losses too. Each
phase (early, middle, late by ply) then gets up to --per-phase informative and
--lost-per-phase lost positions, drawn with fixed shares per kind of play.
The same seed gives the same file. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np
import pyspiel
from open_spiel.python.algorithms import mcts

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from moozi.evaluation import connect_four_solver as solver  # noqa: E402
from moozi.evaluation.positions import (  # noqa: E402
    DEFAULT_PATH,
    PHASES,
    LabelledPosition,
    PositionSet,
    random_mover_baseline,
)

MCTS_SIMULATIONS = 300
MCTS_UCT_C = 2.0
EPSILON = 0.15  # the chance that a move of the MCTS games is uniformly random instead
# (source, games, share of each phase's positions drawn from it)
SOURCES = (
    ("mcts_selfplay", 100, 0.45),
    ("mcts_vs_solver", 80, 0.30),
    ("random_play", 300, 0.25),
)


def _mcts(game, rng: np.random.RandomState):
    evaluator = mcts.RandomRolloutEvaluator(n_rollouts=1, random_state=rng)
    return mcts.MCTSBot(game, MCTS_UCT_C, MCTS_SIMULATIONS, evaluator, solve=True, random_state=rng)


def _play(game, bots, rng: np.random.RandomState, epsilon: float) -> list[int]:
    """One game's move list; each move is random with probability `epsilon`, else the mover's bot's."""
    state = game.new_initial_state()
    while not state.is_terminal():
        bot = bots[state.current_player()]
        if bot is None or rng.random_sample() < epsilon:
            action = int(rng.choice(state.legal_actions()))
        else:
            action = int(bot.step(state))
        state.apply_action(action)
    return state.history()


def _games(source: str, count: int, game, seed: int) -> list[list[int]]:
    rng = np.random.RandomState(seed)
    games = []
    for i in range(count):
        if source == "mcts_selfplay":
            games.append(_play(game, [_mcts(game, rng), _mcts(game, rng)], rng, EPSILON))
        elif source == "mcts_vs_solver":
            bots = [_mcts(game, rng), solver.SolverBot(int(rng.randint(2**31)))]
            games.append(_play(game, bots if i % 2 == 0 else bots[::-1], rng, EPSILON))
        else:
            games.append(_play(game, [None, None], rng, 1.0))
    return games


def _candidates(game, games_by_source) -> list[tuple[str, tuple[int, ...]]]:
    """(source, moves) of every distinct non-terminal board, in the order play first reached it."""
    seen, out = set(), []
    for source, games in games_by_source:
        for moves in games:
            state = game.new_initial_state()
            for ply in range(len(moves)):  # the final, terminal state is left out
                key = str(state)
                if key not in seen:
                    seen.add(key)
                    out.append((source, tuple(moves[:ply])))
                state.apply_action(moves[ply])
    return out


def _label(source: str, moves: tuple[int, ...]) -> LabelledPosition:
    scores = solver.score_moves(moves)
    return LabelledPosition(
        moves=moves,
        scores=tuple(scores.get(c) for c in range(7)),
        best_moves=tuple(solver.best_moves(scores)),
        keeping_moves=tuple(solver.result_keeping_moves(scores)),
        value=solver.value_of(scores),
        source=source,
    )


def _select(labelled: list[LabelledPosition], per_phase: int, rng: np.random.RandomState) -> list[LabelledPosition]:
    """Up to `per_phase` positions of each phase: each source's share first, then the others fill in."""
    chosen = []
    for phase in PHASES:
        pool = {name: [p for p in labelled if p.phase == phase and p.source == name] for name, _, _ in SOURCES}
        pool = {name: [items[k] for k in rng.permutation(len(items))] for name, items in pool.items()}
        picked = []
        for name, _, share in SOURCES:
            take = int(round(share * per_phase))
            picked += pool[name][:take]
            pool[name] = pool[name][take:]
        rest = [p for name, _, _ in SOURCES for p in pool[name]]
        picked += [rest[k] for k in rng.permutation(len(rest))[: max(0, per_phase - len(picked))]]
        chosen += picked[:per_phase]
    return chosen


def _counts(positions) -> dict:
    return {
        phase: {name: sum(p.phase == phase and p.source == name for p in positions) for name, _, _ in SOURCES}
        for phase in PHASES
    }


def make_positions(seed: int, per_phase: int, lost_per_phase: int) -> tuple[PositionSet, dict]:
    game = pyspiel.load_game("connect_four")
    started = time.monotonic()
    games_by_source = [(name, _games(name, count, game, seed + i)) for i, (name, count, _) in enumerate(SOURCES)]
    played = time.monotonic()
    candidates = _candidates(game, games_by_source)
    labelled = [_label(source, moves) for source, moves in candidates]
    informative = [p for p in labelled if p.informative]
    lost = [p for p in labelled if p.value < 0]
    rng = np.random.RandomState(seed + len(SOURCES))
    chosen = _select(informative, per_phase, rng)
    chosen_lost = _select(lost, lost_per_phase, rng)
    positions = sorted(chosen + chosen_lost, key=lambda p: (p.ply, p.moves))
    baseline = random_mover_baseline(positions)
    header = {
        "what": "Connect Four positions (OpenSpiel connect_four, columns 0-6 from the left) with the solver's "
        "score of every legal move, from the view of the player to move (> 0 win, 0 draw, < 0 loss; "
        "further from 0: decided sooner).",
        "made_by": f"python bench/make_connect_four_positions.py --seed {seed} --per-phase {per_phase} "
        f"--lost-per-phase {lost_per_phase}",
        "solver": solver.solver_version(),
        "sources": {
            "mcts_selfplay": f"{SOURCES[0][1]} games of OpenSpiel MCTSBot ({MCTS_SIMULATIONS} simulations, one random "
            f"rollout each, uct_c {MCTS_UCT_C}, solve=True) against itself; each move uniformly random with "
            f"probability {EPSILON}",
            "mcts_vs_solver": f"{SOURCES[1][1]} games of that MCTS against the solver (random among its best moves), "
            f"seats alternating; each move uniformly random with probability {EPSILON}",
            "random_play": f"{SOURCES[2][1]} games of uniformly random play",
        },
        "selection": "every non-terminal position of those games; equal boards once (the first move list "
        "reaching it is kept); positions where every legal move keeps the result were dropped (they "
        "measure nothing), except positions lost for the mover (every move keeps a loss), kept to check "
        f"the sign of value estimates on losses too; then per phase up to {per_phase} informative and "
        f"{lost_per_phase} lost positions, each drawn with shares "
        + ", ".join(f"{name} {share:.0%}" for name, _, share in SOURCES)
        + " (a short source's place filled from the others)",
        "phases": {name: list(bounds) for name, bounds in PHASES.items()},
        "fields": {
            "moves": "columns played from the empty board",
            "to_play": "OpenSpiel player to move (0 moved first)",
            "scores": "solver score per column 0-6, null where the column is full",
            "best_moves": "columns with the highest score",
            "keeping_moves": "columns whose result (sign of the score) equals the best move's",
            "value": "game-theoretic result for the player to move: +1 win, 0 draw, -1 loss",
            "source": "which play reached the position",
        },
        "use": "the move shares (keeps the result, best move) count the informative positions only, those "
        "whose keeping_moves leave out some legal move; the lost ones (value -1) serve the value-sign check; "
        "random_mover_baseline is what a uniformly random mover scores on the informative positions",
        "candidates": {"distinct_non_terminal": len(candidates), "informative": len(informative), "lost": len(lost)},
        "counts": {"informative": _counts(chosen), "lost": _counts(chosen_lost)},
        "random_mover_baseline": {
            measure: {phase: round(value, 4) for phase, value in shares.items()} for measure, shares in baseline.items()
        },
    }
    timing = {"play_seconds": played - started, "total_seconds": time.monotonic() - started}
    return PositionSet(header=header, positions=tuple(positions)), timing


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-phase", type=int, default=200, help="informative positions per phase")
    parser.add_argument("--lost-per-phase", type=int, default=50, help="positions lost for the mover, per phase")
    parser.add_argument("--out", default=str(DEFAULT_PATH))
    args = parser.parse_args(argv)
    position_set, timing = make_positions(args.seed, args.per_phase, args.lost_per_phase)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(position_set.to_json(), encoding="utf-8")
    header = position_set.header
    print(f"{len(position_set.positions)} positions written to {out} in {timing['total_seconds']:.0f} s "
          f"(playing {timing['play_seconds']:.0f} s)")
    print(f"{'phase':<8} " + " ".join(f"{name:>15}" for name, _, _ in SOURCES) + "   lost   random keeps / best")
    baseline = header["random_mover_baseline"]
    for phase, counts in header["counts"]["informative"].items():
        lost = sum(header["counts"]["lost"][phase].values())
        print(f"{phase:<8} " + " ".join(f"{counts[name]:>15}" for name, _, _ in SOURCES)
              + f"   {lost:>4}   {baseline['keeps_result'][phase]:.3f} / {baseline['best_move'][phase]:.3f}")
    print(json.dumps({"positions": len(position_set.positions), **timing, **header["candidates"],
                      "random_keeps_result": baseline["keeps_result"]["all"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
