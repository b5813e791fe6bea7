"""How strong a go9 run is: the checkpoint `load_agent` plays against GNU Go and a random mover.

    python bench/go_strength.py RUN --out bench/results/FILE.json [--gnugo-games 20] [--scale 4]
        [--random-games 40] [--level 1] [--seed 0] [--note TEXT]

Measures, on the run's best checkpoint (else its latest):
- `--gnugo-games` games against GNU Go at `--level` (`--chinese-rules --capture-all-dead`, the run's
  komi, colours alternating; moozi.evaluation.gnugo) at the run's play-time simulations, and the
  same games at `--scale` times them: wins, each game's margin from the agent's side by the
  Tromp-Taylor count and by GNU Go's dead-stone analysis (`final_score`), the margins at GNU Go's
  first pass, the agent's own area, game lengths;
- `--random-games` games against a uniformly random mover, both seats;
- what the run cost: the checkpoint's updates, env steps and minutes, and the run's positions
  (env steps) and games per hour from its metrics.

The file records the commit (and whether the tree was clean), the command, the run's resolved
config, the machine (CPU model, cores, matmul GFLOP/s at evaluation) and every game. Prints one
line per game, then the file's path.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_rates(run_dir: pathlib.Path) -> dict:
    """Positions (env steps) and games per hour over the whole run, from its last metrics row."""
    from moozi.runs.metrics_log import read_metrics

    last = {}
    for row in read_metrics(run_dir):
        if "env_steps" in row and "episodes" in row:
            last = row
    if not last or not last.get("time"):
        return {}
    hours = last["time"] / 3600
    return {"env_steps": last["env_steps"], "episodes": last["episodes"], "seconds": last["time"],
            "positions_per_hour": round(last["env_steps"] / hours), "games_per_hour": round(last["episodes"] / hours)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--out", required=True, help="the result file to write")
    parser.add_argument("--gnugo-games", type=int, default=20)
    parser.add_argument("--scale", type=int, default=4, help="also play at this many times the play-time simulations (0: not)")
    parser.add_argument("--random-games", type=int, default=40)
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-moves", type=int, default=400, help="a GNU Go game ends unscored after this many moves")
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)

    from bench.provenance import provenance, run_config, write_result
    from moozi.evaluation import evaluate
    from moozi.evaluation.gnugo import evaluate_against_gnugo
    from moozi.play import load_agent

    run_dir = pathlib.Path(args.run_dir)
    recorded = run_config(run_dir)
    config = recorded["config"]
    out = {"benchmark": "go_strength", **provenance(), "note": args.note, "run_dir": str(run_dir), **recorded,
           "run": run_rates(run_dir)}
    out["machine"]["matmul_gflops_at_evaluation"] = out["machine"]["matmul_gflops_at_start"]
    agent = load_agent(run_dir)
    meta = json.loads((agent.checkpoint / "meta.json").read_text())
    counters = meta["counters"]
    out["checkpoint"] = {"name": agent.checkpoint.name, "updates": counters.get("updates"),
                         "env_steps": counters.get("env_steps"),
                         "minutes": round(counters.get("elapsed_seconds", 0) / 60, 2)}
    started = time.monotonic()
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    play_simulations = agent.simulations
    out["vs_gnugo"] = []
    for scale in [1] + ([args.scale] if args.scale > 1 else []):
        player = agent if scale == 1 else load_agent(run_dir, simulations=play_simulations * scale)
        result = evaluate_against_gnugo(player, args.gnugo_games, args.seed, args.level, max_moves=args.max_moves, log=log)
        out["vs_gnugo"].append({"simulations": player.simulations, **json.loads(result.to_json())})
        log(result.format_table())
    if args.random_games:
        res = evaluate(agent, config["game"], "random", args.random_games, seed=args.seed)
        out["vs_random"] = {"wins": res.wins, "draws": res.draws, "losses": res.losses, "games": res.games,
                            "win_rate": res.win_rate, "win_rate_ci": res.win_rate_ci, "simulations": agent.simulations}
        log(f"vs random: {res.wins}-{res.draws}-{res.losses}")
    out["evaluation_minutes"] = round((time.monotonic() - started) / 60, 2)
    # The keys bench/results_page.py reads for its Go section (the match at the play-time simulations).
    first = out["vs_gnugo"][0]
    out.update(game="go9", agent=config["agent"], seed=config["seed"], minutes=out["checkpoint"]["minutes"],
               updates=out["checkpoint"]["updates"], env_steps=out["checkpoint"]["env_steps"],
               matmul_gflops=out["machine"]["matmul_gflops_at_evaluation"])
    out[f"vs_gnugo_level{args.level}"] = {
        "wins": first["wins"], "draws": first["draws"], "games": first["games"],
        "margins": [g["margin_tromp_taylor"] for g in first["per_game"]],
        "gnugo_margins": [g["margin_gnugo"] for g in first["per_game"]],
        "own_area": [g["agent_area_tromp_taylor"] for g in first["per_game"]],
        "moves": [g["moves"] for g in first["per_game"]],
        "agent_passed_first": first["summary"]["agent_passed_first"]}
    path = write_result(args.out, out)
    print(path)
    return out


if __name__ == "__main__":
    main()
