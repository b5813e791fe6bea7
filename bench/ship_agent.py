"""Measure a run's agent as a player would, and (with --export) ship it with the package.

    python bench/ship_agent.py RUN --out bench/results/FILE.json [--export] [--trained-by "COMMAND"]
        [--games 100] [--solver-games 10] [--checkpoint best]

Measures the checkpoint `load_agent(RUN)` plays (or --checkpoint), at its play-time simulations:
- connect_four: --games games against `mcts:1000` with its search and with the network alone (one
  simulation: Gumbel MuZero then considers only the prior's top move, so the move is the policy's
  argmax); --solver-games games against the perfect `solver` in each seat (wins as first player,
  game lengths as second); the share of solver-labelled positions whose result its move keeps.
- tic_tac_toe: --games games against `minimax` and against `random`, with its search and alone.
- every game: seconds per move (its own moves in self-play games, after compiling).

--export then writes the agent to moozi/agents/<game>/ (moozi.play.agent_export) with these
figures as its description, so `moozi agents` shows them and `moozi play <game>` plays it. The
result file records the commit, command, machine and the run's resolved config (bench/provenance.py).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.provenance import provenance, run_config, write_result  # noqa: E402

GAMES = ("connect_four", "tic_tac_toe")


def _match(agent, game: str, opponent: str, games: int, seed: int) -> dict:
    from moozi.evaluation import evaluate

    res = evaluate(agent, game, opponent, games, seed=seed)
    print(f"  {opponent}: {res.wins}-{res.draws}-{res.losses}", file=sys.stderr, flush=True)
    return {"wins": res.wins, "draws": res.draws, "losses": res.losses, "games": res.games,
            "win_rate": res.win_rate, "win_rate_ci": res.win_rate_ci, "simulations": agent.simulations,
            "per_seat": [{"player": s.player, "wins": s.wins, "draws": s.draws, "losses": s.losses}
                         for s in res.per_seat]}


def _solver_games(agent, games_per_seat: int, seed: int) -> dict:
    """Games against the perfect solver in each seat: results and lengths, per seat."""
    import pyspiel

    from moozi.evaluation.matches import make_opponent

    game = pyspiel.load_game("connect_four")
    out = {}
    for seat in (0, 1):
        results, lengths = [], []
        for i in range(games_per_seat):
            solver = make_opponent("solver", game, 1 - seat, seed + i)
            bots = {seat: agent.as_openspiel_bot(seat), 1 - seat: solver}
            state = game.new_initial_state()
            while not state.is_terminal():
                player = state.current_player()
                state.apply_action(bots[player].step(state))
            returns = state.returns()
            results.append("win" if returns[seat] > 0 else "draw" if returns[seat] == 0 else "loss")
            lengths.append(len(state.history()))
        out["first_player" if seat == 0 else "second_player"] = {
            "wins": results.count("win"), "draws": results.count("draw"), "losses": results.count("loss"),
            "games": games_per_seat, "lengths": lengths}
        print(f"  solver, agent {'first' if seat == 0 else 'second'}: {results} lengths {lengths}",
              file=sys.stderr, flush=True)
    return out


def _seconds_per_move(agent, episodes: int = 3) -> float:
    """Wall-clock seconds per move of the agent's own search, compiling excluded (a first episode warms up)."""
    agent.run_episode(seed=10_000)
    started, moves = time.perf_counter(), 0
    for i in range(episodes):
        moves += agent.run_episode(seed=10_001 + i).steps
    return round((time.perf_counter() - started) / max(moves, 1), 4)


def measure(run: str, checkpoint, games: int, solver_games: int, seed: int) -> dict:
    from moozi.play import load_agent

    agent = load_agent(run, checkpoint=checkpoint)
    game = agent.config.game.split(":")[-1]
    if game not in GAMES:
        raise SystemExit(f"{run} plays {agent.config.game}; this script measures {', '.join(GAMES)}")
    alone = load_agent(run, checkpoint=agent.checkpoint, simulations=1)
    meta = json.loads((agent.checkpoint / "meta.json").read_text())
    counters = meta.get("counters", {})
    out = {"game": game, "agent": agent.config.agent, "simulations": agent.simulations,
           "checkpoint": {"name": agent.checkpoint.name, "updates": counters.get("updates"),
                          "env_steps": counters.get("env_steps"),
                          "minutes": round(counters.get("elapsed_seconds", 0.0) / 60, 2)},
           "seconds_per_move": _seconds_per_move(agent), "seconds_per_move_alone": _seconds_per_move(alone)}
    opponents = ("mcts:1000",) if game == "connect_four" else ("minimax", "random")
    out["with_search"] = {o: _match(agent, agent.config.game, o, games, seed) for o in opponents}
    out["network_alone"] = {o: _match(alone, agent.config.game, o, games, seed) for o in opponents}
    if game == "connect_four":
        from moozi.evaluation.position_eval import evaluate_agent_on_positions

        if solver_games:
            out["solver"] = _solver_games(agent, solver_games, seed)
        positions = evaluate_agent_on_positions(agent, seed=seed)
        out["positions"] = {"keeps_result": positions.keeps_result, "best_move": positions.best_move,
                            "random_keeps_result": positions.random_keeps_result}
        print(f"  positions kept: {positions.keeps_result['all']:.3f}", file=sys.stderr, flush=True)
    return out


def strength_lines(m: dict) -> list[str]:
    """The measured strength in a few lines, for agent.json (what `moozi agents` prints)."""
    def wdl(r: dict) -> str:
        return f"{r['wins']}-{r['draws']}-{r['losses']} in {r['games']}"

    lines = []
    for opponent, r in m["with_search"].items():
        alone = m["network_alone"][opponent]
        lines.append(f"vs {opponent}: {wdl(r)} (W-D-L) with its search; the network alone {wdl(alone)}")
    if "positions" in m:
        lines.append(f"keeps the game-theoretic result on {m['positions']['keeps_result']['all']:.1%} of the "
                     "solver-labelled positions")
    if "solver" in m:
        first, second = m["solver"]["first_player"], m["solver"]["second_player"]
        lines.append(f"vs the perfect solver: {first['wins']} of {first['games']} won as first player; "
                     f"as second, games of {min(second['lengths'])}-{max(second['lengths'])} plies")
    lines.append(f"{m['seconds_per_move']:.3f} s per move with {m['simulations']} simulations "
                 f"(measured at {m['machine_gflops']:.0f} GFLOP/s)")
    return lines


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--out", required=True, help="the result file to write")
    parser.add_argument("--checkpoint", default=None, help="best | latest | a checkpoint directory (default: best)")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--solver-games", type=int, default=10, help="connect_four: games per seat against the solver")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--export", action="store_true", help="also ship it: write moozi/agents/<game>/")
    parser.add_argument("--trained-by", default=None, help="the command that trained the run (for agent.json)")
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)
    if args.export and not args.trained_by:
        parser.error("--export needs --trained-by: a shipped agent says how to retrain it")
    out = {"benchmark": "ship_agent", **provenance(), "note": args.note, "run_dir": args.run_dir,
           **run_config(pathlib.Path(args.run_dir))}
    started = time.monotonic()
    measured = measure(args.run_dir, args.checkpoint, args.games, args.solver_games, args.seed)
    out.update(measured, evaluation_minutes=round((time.monotonic() - started) / 60, 2))
    path = write_result(args.out, out)
    print(path)
    if args.export:
        from moozi.play.agent_export import export_agent
        from moozi.play.shipped import SHIPPED_DIR

        lines = strength_lines({**measured, "machine_gflops": out["machine"]["matmul_gflops_at_start"]})
        description = {"game": measured["game"], "agent": measured["agent"], "simulations": measured["simulations"],
                       "trained_by": args.trained_by, "strength": lines, "result_file": f"bench/results/{path.name}"}
        shipped = export_agent(args.run_dir, SHIPPED_DIR / measured["game"], description=description,
                               checkpoint=args.checkpoint)
        print(f"shipped: {shipped}")
    return out


if __name__ == "__main__":
    main()
