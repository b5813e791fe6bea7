"""Time to target: how fast `moozi train` learns, measured on wall-clock time.

    python bench/learning.py [--games tic_tac_toe,connect_four,breakout,asterix,...] [--seeds 1] [--quick]

- tic_tac_toe: trains the preset for up to --ttt-minutes, checkpointing every
  15 s, then evaluates the checkpoints in order against `minimax` (100 games,
  both seats) and reports the first training time at which the agent lost none.
- connect_four: trains the preset (`--c4-agent muzero` or `alphazero`) for the
  largest of --c4-marks minutes (or reads a run trained before, --c4-run-dir);
  at each mark, the checkpoint reached by then, searching with each of
  --c4-simulations play-time simulation counts, plays `mcts:1000` and
  `mcts:100` (--c4-opponents; --c4-games games, both seats) and the perfect
  `solver` (--c4-solver-games; its draws and losses per seat), and is scored on
  the solver-labelled positions (`moozi eval --positions`). Each row records
  the updates, env steps, simulations, and the matmul speed at evaluation.
- go9: trains the preset for --go-minutes (or reads --go-run-dir) and
  measures the checkpoint `load_agent` plays: --go-games games against a
  random mover, then --go-gnugo-games GTP games against GNU Go level 1
  (bench/gtp_match.py): each game's area-score margin from the agent's side,
  its length, and how often the agent passed before GNU Go did.
- breakout, asterix, freeway, seaquest, space_invaders (the MinAtar presets):
  trains for the largest of --minatar-minutes; at each mark, the newest
  checkpoint by then plays --minatar-episodes greedy episodes (sticky actions
  0.1, each cut after --minatar-max-steps steps): the mean return with its 95%
  bootstrap interval and the number of cut episodes; the same at each of
  --minatar-env-step-marks (default 5M, the published curves' budget), with
  the checkpoint the run wrote on reaching it.
- 2048: trains the preset for --chance-minutes with each of --chance-agents
  (stochastic_muzero, the preset's agent; muzero, the deterministic model;
  alphazero, the rules as the model; all else equal); the checkpoint
  `load_agent` plays then plays --chance-episodes episodes: mean score with
  95% intervals and the share of games reaching each tile (256 ... 4096).
  --chance-random adds a uniform random mover on the same env seeds.
- backgammon: the same training; the checkpoint then plays --chance-episodes
  games against each of `random`, `pipcount` (a greedy pip-count bot),
  `pubeval` and `gnubg` (the [backgammon] extra), both seats: wins, draws,
  losses, Wilson intervals and points per game, per seat.

"Training time" runs from the moment `moozi train` would start (building the
roles, compiling included) to the checkpoint. The machine's speed varies
between sessions, so the JSON records a float32 2048x2048 matmul's GFLOP/s
(`matmul_gflops`) with every run: give it with every timed result. Prints a
table, then ONE JSON object on its last line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.provenance import config_record, matmul_gflops, provenance, run_config  # noqa: E402
from moozi.play.go_rules import parse_score  # noqa: E402


OVERRIDES: dict[str, str] = {}  # --set key=value, applied to every game's preset
AGENT_OVERRIDES: dict[str, dict[str, str]] = {"ppo": {}, "impala": {}}  # --ppo-set / --impala-set key=value


def _train(game: str, minutes: float, seed: int, run_dir: pathlib.Path, checkpoint_minutes: float,
           extra: dict | None = None) -> float:
    """Trains and returns the seconds spent building the driver (added to each checkpoint's time)."""
    from moozi.config import build_config
    from moozi.training.driver import Driver

    config = build_config(
        game,
        overrides={
            **OVERRIDES,
            **(extra or {}),
            "seed": seed,
            "train.max_minutes": minutes,
            "train.checkpoint_every_minutes": checkpoint_minutes,
            "train.keep_checkpoints": 10_000,
        },
    )
    start = time.monotonic()
    driver = Driver(config, run_dir, progress=False)
    setup_seconds = time.monotonic() - start
    try:
        driver.run()
    finally:
        driver.close()
    return setup_seconds


def _checkpoints(run_dir: pathlib.Path):
    """(training seconds, path) of every checkpoint, oldest first."""
    out = []
    for path in sorted((run_dir / "checkpoints").glob("ckpt-*")):
        meta = json.loads((path / "meta.json").read_text())
        out.append((meta["counters"]["elapsed_seconds"], path))
    return out


def tic_tac_toe(seed: int, minutes: float, work: pathlib.Path) -> dict:
    from moozi.play import load_agent
    from moozi.evaluation import evaluate

    run_dir = work / f"ttt-{seed}"
    setup = _train("tic_tac_toe", minutes, seed, run_dir, checkpoint_minutes=0.25)
    result = {"seed": seed, "setup_seconds": round(setup, 1), "minutes_to_no_losses_vs_minimax": None, "curve": [],
              **run_config(run_dir)}
    for elapsed, path in _checkpoints(run_dir):
        agent = load_agent(run_dir, checkpoint=path)
        vs_minimax = evaluate(agent, "tic_tac_toe", "minimax", 100, seed=seed)
        minutes_here = (elapsed + setup) / 60
        result["curve"].append({"minutes": round(minutes_here, 2), "checkpoint": path.name,
                                **_counters(path), "simulations": agent.simulations,
                                "losses_vs_minimax": vs_minimax.losses})
        if vs_minimax.losses == 0:
            result["minutes_to_no_losses_vs_minimax"] = round(minutes_here, 2)
            vs_random = evaluate(agent, "tic_tac_toe", "random", 100, seed=seed)
            result["at_target_vs_random"] = {"wins": vs_random.wins, "draws": vs_random.draws, "losses": vs_random.losses}
            break
    return result


def _counters(checkpoint: pathlib.Path) -> dict:
    """The updates and env steps of the checkpoint itself (not the run's totals)."""
    counters = json.loads((checkpoint / "meta.json").read_text())["counters"]
    return {"updates": counters.get("updates"), "env_steps": counters.get("env_steps")}


def _seat_counts(result) -> list[dict]:
    return [{"player": s.player, "wins": s.wins, "draws": s.draws, "losses": s.losses} for s in result.per_seat]


def _marks(text: str) -> list:
    """A comma-separated list of marks: minutes, or "best"."""
    return [m if m == "best" else float(m) for m in text.split(",") if m]


def _mark_checkpoint(run_dir: pathlib.Path, mark, checkpoints, setup: float):
    """(training seconds, path) of the checkpoint a mark measures: "best", what `load_agent(run)` plays
    (the in-training tests' best checkpoint), or a minute, the newest checkpoint saved by then."""
    if mark == "best":
        from moozi.runs.checkpoint import best_checkpoint

        path = best_checkpoint(run_dir)
        if path is None:
            raise SystemExit(f"{run_dir} has no best checkpoint (it trained without in-training tests)")
        return json.loads((path / "meta.json").read_text())["counters"]["elapsed_seconds"], path
    eligible = [(e, p) for e, p in checkpoints if (e + setup) / 60 <= mark + 0.5] or checkpoints[:1]
    return eligible[-1]


def connect_four(seed: int, marks: list, work: pathlib.Path, games: int, solver_games: int,
                 agent_kind: str, simulations: list[int | None], opponents: list[str],
                 run_dir: pathlib.Path | None = None) -> dict:
    """Trains (or, with `run_dir`, reads a run trained before) and measures each mark's checkpoint
    at each play-time simulation count (None: the preset's `planner.play_simulations`)."""
    from moozi.play import load_agent
    from moozi.evaluation import evaluate
    from moozi.evaluation.position_eval import evaluate_agent_on_positions

    if run_dir is not None:  # the run's own seed and agent
        saved = json.loads((run_dir / "config.json").read_text())
        seed, agent_kind = saved["seed"], saved["agent"]
    if run_dir is None:
        run_dir = work / f"c4-{agent_kind}-{seed}"
        minutes = [m for m in marks if m != "best"]
        setup = _train("connect_four", max(minutes), seed, run_dir, checkpoint_minutes=min(minutes) / 3,
                       extra={"agent": agent_kind})
    else:
        setup = 0.0  # `moozi train`'s own clock: from the driver's start, its setup not counted
    checkpoints = _checkpoints(run_dir)
    out = {"seed": seed, "agent": agent_kind, "run_dir": str(run_dir), "setup_seconds": round(setup, 1),
           "train_simulations": json.loads((run_dir / "config.json").read_text())["planner"]["num_simulations"],
           "marks": [], **run_config(run_dir)}
    for mark in marks:
        elapsed, path = _mark_checkpoint(run_dir, mark, checkpoints, setup)
        meta = json.loads((path / "meta.json").read_text())
        for count in simulations:
            agent = load_agent(run_dir, checkpoint=path, simulations=count)
            row = {"mark": mark, "checkpoint": path.name,
                   "minutes": round((elapsed + setup) / 60, 2), "updates": meta["counters"].get("updates"),
                   "env_steps": meta["counters"].get("env_steps"), "checkpoint_saved_at": meta.get("saved_at"),
                   "simulations": agent.simulations,
                   "matmul_gflops_at_evaluation": matmul_gflops()}
            started = time.monotonic()
            for opponent in opponents:
                res = evaluate(agent, "connect_four", opponent, games, seed=seed)
                row[opponent] = {"win_rate": res.win_rate, "win_rate_ci": res.win_rate_ci, "wins": res.wins,
                                 "draws": res.draws, "losses": res.losses, "games": res.games,
                                 "per_seat": _seat_counts(res)}
            if solver_games:
                solver = evaluate(agent, "connect_four", "solver", solver_games, seed=seed)
                row["solver"] = {"games": solver.games, "per_seat": _seat_counts(solver)}
            positions = evaluate_agent_on_positions(agent, seed=seed)
            row["positions"] = {"keeps_result": positions.keeps_result, "best_move": positions.best_move,
                                "random_keeps_result": positions.random_keeps_result,
                                "value_sign_accuracy": positions.value_sign_accuracy}
            row["evaluation_minutes"] = round((time.monotonic() - started) / 60, 2)
            print("connect_four", json.dumps(row), file=sys.stderr, flush=True)
            out["marks"].append(row)
    return out


GNUGO_LEVEL_1 = "/usr/games/gnugo --mode gtp --boardsize 9 --level 1 --chinese-rules --capture-all-dead"


def go9(seed: int, minutes: float, work: pathlib.Path, games: int, gnugo_games: int, gnugo: str,
        simulations: int | None, run_dir: pathlib.Path | None = None) -> dict:
    """Trains the go9 preset (or reads a run trained before) and measures the checkpoint `load_agent`
    plays: `games` games against a random mover (both seats) and `gnugo_games` GTP games against
    `gnugo` refereed by bench/gtp_match.py, with each game's area-score margin and first passes."""
    from moozi.play import load_agent
    from moozi.evaluation import evaluate
    from moozi.runs.checkpoint import best_checkpoint

    from bench.gtp_match import run_match

    setup = 0.0
    if run_dir is None:
        run_dir = work / f"go9-{seed}"
        setup = _train("go9", minutes, seed, run_dir, checkpoint_minutes=minutes / 3)
    saved = json.loads((run_dir / "config.json").read_text())
    agent = load_agent(run_dir, simulations=simulations)
    path = best_checkpoint(run_dir) or _checkpoints(run_dir)[-1][1]
    meta = json.loads((path / "meta.json").read_text())
    out = {"game": "go9", "seed": saved["seed"], "agent": saved["agent"], "run_dir": str(run_dir),
           "trained_minutes": minutes, "setup_seconds": round(setup, 1), "checkpoint": path.name,
           "minutes": round((meta["counters"]["elapsed_seconds"] + setup) / 60, 2),
           "updates": meta["counters"].get("updates"), "env_steps": meta["counters"].get("env_steps"),
           "checkpoint_saved_at": meta.get("saved_at"), "train_simulations": saved["planner"]["num_simulations"],
           "simulations": agent.simulations, "play_pass_rule": saved["planner"].get("play_pass_rule", "search"),
           "matmul_gflops_at_evaluation": matmul_gflops(), **run_config(run_dir)}
    started = time.monotonic()
    res = evaluate(agent, "go9", "random", games, seed=seed)
    out["vs_random"] = {"win_rate": res.win_rate, "win_rate_ci": res.win_rate_ci, "wins": res.wins,
                        "draws": res.draws, "losses": res.losses, "games": res.games, "per_seat": _seat_counts(res)}
    del agent
    if gnugo_games:
        sims = [] if simulations is None else ["--simulations", str(simulations)]
        engine = " ".join([sys.executable, "-m", "moozi.cli", "gtp", str(run_dir), "--checkpoint", str(path), *sims])
        match = run_match({"A": engine, "B": gnugo}, gnugo_games, seed=seed, out=sys.stderr)
        results = match["results"]
        out["vs_gnugo"] = {
            "engine": gnugo, "games": match["games"], "wins": match["wins"]["A"], "draws": match["draws"],
            # Area-score margin from the agent's side (positive: the agent won by that much).
            "margins": [_agent_margin(r) for r in results],
            "moves": [r["moves"] for r in results],
            "agent_passed_first": sum(_passed_first(r) for r in results),
            # GNU Go's own count at the end (final_score: its dead stones removed), from the agent's side.
            "gnugo_margins": [_margin_of(r, r["final_scores"].get("B")) for r in results],
            # At GNU Go's first pass: the referee's count and GNU Go's final_score then, from the agent's side.
            "margins_at_gnugo_pass": [_at_pass(r) for r in results],
            "results": results,
        }
    out["evaluation_minutes"] = round((time.monotonic() - started) / 60, 2)
    print("go9", json.dumps({k: v for k, v in out.items() if k not in ("vs_gnugo", "config")}), file=sys.stderr, flush=True)
    return out


def _agent_margin(result: dict) -> float | None:
    """The referee's area score as the agent's (engine A's) margin; None for a game not scored."""
    return _margin_of(result, result["score"])


def _margin_of(result: dict, score: str | None) -> float | None:
    """A GTP score (B+x / W+x / 0) as the agent's (engine A's) margin in this game; None for none."""
    if score is None:
        return None
    margin = parse_score(score)
    return margin if result["black"] == "A" else -margin


def _at_pass(result: dict) -> dict | None:
    """The margins from the agent's side at GNU Go's (engine B's) first pass; None where it never passed."""
    at = result["at_first_pass"].get("B")
    if at is None:
        return None
    return {"move": at["move"], "tromp_taylor": _margin_of(result, at["score"]),
            "gnugo": _margin_of(result, at["final_scores"].get("B"))}


def _passed_first(result: dict) -> bool:
    """Whether the agent (A) passed before its opponent had passed."""
    mine, theirs = result["first_pass"]["A"], result["first_pass"]["B"]
    return mine is not None and (theirs is None or mine < theirs)


MINATAR_GAMES = ("breakout", "asterix", "freeway", "seaquest", "space_invaders")


def minatar_run_name(game: str, seed: int, agent: str = "muzero") -> str:
    """The run directory's name under --work-dir of a MinAtar run through the driver (bench/plot_learning.py
    reads its metrics.jsonl): `agent` is muzero or a report key's agent, such as ppo-host."""
    return f"{game}-{seed}" if agent == "muzero" else f"{game}-{agent.removesuffix('-host')}-host-{seed}"


def minatar(game: str, seed: int, minutes: list[float], work: pathlib.Path, episodes: int, max_steps: int,
            agent: str = "muzero", sampled: bool = False, env_step_marks: tuple[int, ...] = ()) -> dict:
    """Trains a MinAtar preset through `moozi train`'s driver (the host path: MinAtar's own envs); at
    each mark, `episodes` episodes (sticky actions 0.1, each cut after `max_steps` steps) of the newest
    checkpoint by then, played as `load_agent` plays (MuZero: greedy on the visit counts; PPO and
    IMPALA: sampled from the policy): mean return and its bootstrap interval. `sampled` adds, for
    MuZero, as many episodes of the same checkpoint played as in training (root noise kept, the action
    drawn: `moozi eval --sample`), the play the MinAtar paper's curves show (its training episodes).
    Each of `env_step_marks` (the budgets of published curves, e.g. 5M) measures the checkpoint the
    run wrote at the end of the iteration that reached it (train.checkpoint_at_env_steps) the same way."""
    from moozi.play import load_agent
    from moozi.evaluation.matches import evaluate, print_episode_progress

    run_dir = work / minatar_run_name(game, seed, agent)
    extra = {"train.checkpoint_at_env_steps": ",".join(map(str, env_step_marks))} if env_step_marks else {}
    if agent != "muzero":
        extra.update({"agent": agent, **{f"{agent}.{k}": v for k, v in AGENT_OVERRIDES[agent].items()}})
    trained = [m for m in minutes if m != "best"]
    setup = _train(game, max(trained), seed, run_dir, checkpoint_minutes=min(trained) / 2, extra=extra)
    checkpoints = _checkpoints(run_dir)
    out = {"game": game, "seed": seed, "marks": [], **run_config(run_dir)}
    if agent != "muzero":
        out.update(agent=agent, path="host")
    marks = [*minutes, *(("env_steps", n) for n in env_step_marks)]
    for mark in marks:
        if isinstance(mark, tuple):
            reached = [(e, p) for e, p in checkpoints if _counters(p)["env_steps"] >= mark[1]]
            if not reached:
                out["marks"].append({"env_step_mark": mark[1], "reached": False})
                continue
            elapsed, path = reached[0]
        else:
            elapsed, path = _mark_checkpoint(run_dir, mark, checkpoints, setup)
        player = load_agent(run_dir, checkpoint=path)
        meta = json.loads((path / "meta.json").read_text())["counters"]
        result = evaluate(player, game, "random", episodes, seed * 1000, max_steps=max_steps,
                          progress=print_episode_progress)
        label = {"mark": "best"} if mark == "best" else {"env_step_mark": mark[1]} if isinstance(mark, tuple) else {}
        out["marks"].append({**label, **({"checkpoint": path.name} if label else {}),
                             "minutes": round((elapsed + setup) / 60, 2), "updates": meta.get("updates"),
                             "env_steps": meta.get("env_steps"), "mean_return": result.mean_return,
                             "bootstrap_ci": result.mean_return_bootstrap_ci, "episodes": episodes,
                             "cut_episodes": result.cut_episodes, "max_steps": max_steps,
                             "sticky_actions": _minatar_sticky(out["config"]), "play": "as load_agent plays"})
        if sampled and agent == "muzero":
            result = evaluate(load_agent(run_dir, checkpoint=path, sample=True), game, "random", episodes,
                              seed * 1000, max_steps=max_steps, progress=print_episode_progress)
            out["marks"][-1].update(sampled_mean_return=result.mean_return,
                                    sampled_bootstrap_ci=result.mean_return_bootstrap_ci,
                                    sampled_cut_episodes=result.cut_episodes)
    return out


def _minatar_sticky(config: dict) -> float:
    """The sticky-action probability the evaluation's env used (None in the config: MinAtar's 0.1)."""
    prob = config["env"].get("sticky_action_prob")
    return 0.1 if prob is None else prob


CHANCE_GAMES = ("2048", "backgammon")
# alphazero: the rules as the model (with --set planner.chance_search=exact, chance nodes over the real dice
# or tiles; docs/stochastic.md).
CHANCE_AGENTS = ("stochastic_muzero", "muzero", "alphazero")
BACKGAMMON_OPPONENTS = ("random", "pipcount", "pubeval", "gnubg")  # the last two: the [backgammon] extra


def random_mover_2048(episodes: int, seed: int) -> dict:
    """A uniform random mover on the 2048 preset's env, episode i on env seed `seed + i` (the seeds
    the agent's evaluation uses): its scores and largest tiles, the scale of every 2048 result."""
    import numpy as np

    from moozi.builders import env_options
    from moozi.config import build_config
    from moozi.envs.registry import make_host_env
    from moozi.evaluation.matches import ReturnResult
    from moozi.evaluation.tiles import largest_tile

    config = build_config("2048")
    env = make_host_env(config.game, **env_options(config))
    rng = np.random.default_rng(seed)
    returns, tiles = [], []
    for i in range(episodes):
        step, total = env.reset(seed=seed + i), 0.0
        while not step.is_last:
            step = env.step(int(rng.choice(np.flatnonzero(step.legal_actions))), False)
            total += float(step.reward)
        returns.append(total)
        tiles.append(largest_tile(step.obs))
    return _return_row(ReturnResult.from_returns(game=config.game, seed=seed, returns=returns, largest_tiles=tiles))


def _return_row(result) -> dict:
    from moozi.evaluation.tiles import tile_shares

    row = {"episodes": result.games, "mean_return": result.mean_return, "mean_return_ci": result.mean_return_ci,
           "bootstrap_ci": result.mean_return_bootstrap_ci, "returns": list(result.returns)}
    if result.largest_tiles is not None:
        row["largest_tiles"] = list(result.largest_tiles)
        row["tile_shares"] = {str(t): share for t, share in tile_shares(list(result.largest_tiles)).items()}
    return row


def chance_game(game: str, agent: str, seed: int, minutes: float, work: pathlib.Path, episodes: int,
                opponent_games: dict | None = None) -> dict:
    """Trains the game's preset with `agent` (stochastic_muzero, the preset's, or muzero: the deterministic
    model, every other key the same) for `minutes`; the checkpoint `load_agent` plays (the best by the
    in-training tests), searching with the run's play-time simulations, then plays `episodes` games.
    2048: episodes on env seeds seed*1000 + i: mean score, 95% intervals, largest tiles and their shares.
    backgammon: against each of BACKGAMMON_OPPONENTS, both seats: wins, draws, losses, Wilson intervals,
    points per game; `opponent_games` gives an opponent its own number of games (else `episodes`)."""
    from moozi.play import load_agent
    from moozi.evaluation.matches import evaluate, print_episode_progress

    run_dir = work / f"{game}-{agent}-{seed}"
    setup = _train(game, minutes, seed, run_dir, checkpoint_minutes=minutes / 4, extra={"agent": agent})
    player = load_agent(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    # updates and env_steps: the played checkpoint's own; run_updates / run_env_steps: the whole run's.
    row = {"game": game, "agent": agent, "seed": seed, "minutes": minutes, "setup_seconds": round(setup, 1),
           "checkpoint": player.checkpoint.name, **_counters(player.checkpoint),
           "checkpoint_minutes": round(json.loads((player.checkpoint / "meta.json").read_text())["counters"]
                                       .get("elapsed_seconds", 0) / 60, 2),
           "run_updates": summary.get("updates"), "run_env_steps": summary.get("env_steps"),
           "matmul_gflops_at_evaluation": matmul_gflops(), **run_config(run_dir)}
    if game == "backgammon":
        for opponent in BACKGAMMON_OPPONENTS:
            result = evaluate(player, game, opponent, (opponent_games or {}).get(opponent, episodes), seed=seed * 1000)
            row["simulations"] = result.simulations
            row[opponent] = {"win_rate": result.win_rate, "win_rate_ci": result.win_rate_ci, "wins": result.wins,
                             "draws": result.draws, "losses": result.losses, "games": result.games,
                             "points_per_game": result.points_per_game, "per_seat": _seat_counts(result)}
        return row
    result = evaluate(player, game, "random", episodes, seed * 1000, progress=print_episode_progress)
    return {**row, "simulations": result.simulations, **_return_row(result)}


GYMNAX_MINATAR = {"breakout": "Breakout-MinAtar", "asterix": "Asterix-MinAtar", "freeway": "Freeway-MinAtar",
                  "seaquest": "Seaquest-MinAtar", "space_invaders": "SpaceInvaders-MinAtar"}


def model_free_minatar(agent: str, game: str, seed: int, minutes: list[float], episodes: int, max_steps: int,
                       num_envs: int, rollout_steps: int) -> dict:
    """PPO or IMPALA on the game's gymnax twin (sticky actions 0.1), the whole loop jitted
    (moozi/actor_critic/anakin_loop.py): at each mark of training time (compiling included),
    `episodes` episodes of the sampled policy, all at once."""
    from moozi.config.overrides import apply_overrides
    from moozi.envs import gymnax
    from moozi.evaluation.intervals import bootstrap_mean_interval

    from moozi.actor_critic import IMPALAConfig, PPOConfig, make_anakin_trainer

    AgentConfig = PPOConfig if agent == "ppo" else IMPALAConfig
    start = time.monotonic()
    config = apply_overrides(AgentConfig(), AGENT_OVERRIDES[agent], prefix=f"{agent}.")
    trainer = make_anakin_trainer(gymnax.make("gymnax:" + GYMNAX_MINATAR[game]), config,
                                  num_envs=num_envs, rollout_steps=rollout_steps, seed=seed)
    out = {"game": game, "agent": agent, "seed": seed, "num_envs": num_envs, "rollout_steps": rollout_steps,
           agent: dict(AGENT_OVERRIDES[agent]), "marks": [],
           **config_record({"agent": agent, "env": "gymnax:" + GYMNAX_MINATAR[game], "num_envs": num_envs,
                            "rollout_steps": rollout_steps, "seed": seed, agent: dataclasses.asdict(config)})}
    trained = 0.0  # seconds of training (building and compiling included), evaluations excluded
    since = start
    out["curve"] = []  # (minutes, env steps, mean return of the training episodes that ended in that iteration)
    for mark in sorted(minutes):
        while trained < mark * 60:
            metrics = trainer.iteration()
            trained += time.monotonic() - since
            since = time.monotonic()
            if trainer.updates % (50 * trainer.updates_per_rollout) == 0 and metrics["episode_return"] == metrics["episode_return"]:
                out["curve"].append([round(trained / 60, 3), trainer.env_steps, round(metrics["episode_return"], 3)])
        returns = trainer.evaluate(episodes, seed=seed * 1000, max_steps=max_steps)
        out["marks"].append({"minutes": round(trained / 60, 2), "env_steps": trainer.env_steps,
                             "updates": trainer.updates, "mean_return": round(float(returns.mean()), 3),
                             "bootstrap_ci": bootstrap_mean_interval(returns), "episodes": episodes,
                             "max_steps": max_steps, "last_training_return": metrics.get("episode_return")})
        print(game, agent, json.dumps(out["marks"][-1]), file=sys.stderr, flush=True)
        since = time.monotonic()
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", default="tic_tac_toe,connect_four,breakout")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--first-seed", type=int, default=0, help="seeds run from here: first, first+1, ...")
    parser.add_argument("--quick", action="store_true", help="tic-tac-toe only, 4 minutes")
    parser.add_argument("--ttt-minutes", type=float, default=10.0)
    parser.add_argument("--c4-marks", default="15,30,60",
                        help="minutes at which connect_four is measured; 'best': also the run's best checkpoint "
                        "by the in-training tests (what load_agent plays)")
    parser.add_argument("--c4-games", type=int, default=100, help="games against each MCTS opponent")
    parser.add_argument("--c4-solver-games", type=int, default=20, help="games against the perfect solver")
    parser.add_argument("--c4-agent", choices=("muzero", "alphazero"), default="muzero")
    parser.add_argument("--c4-simulations", default="play",
                        help="play-time simulation counts to measure each mark at, comma-separated; "
                        "'play': the preset's planner.play_simulations (e.g. play,16,100)")
    parser.add_argument("--c4-opponents", default="mcts:1000,mcts:100", help="the MCTS opponents, comma-separated")
    parser.add_argument("--c4-run-dir", default=None,
                        help="measure this run directory's checkpoints (trained before with `moozi train "
                        "--set train.checkpoint_every_minutes=...`) instead of training; one seed")
    parser.add_argument("--go-minutes", type=float, default=60.0, help="go9: minutes to train")
    parser.add_argument("--go-games", type=int, default=40, help="go9: games against a random mover (both seats)")
    parser.add_argument("--go-gnugo-games", type=int, default=10, help="go9: GTP games against --go-gnugo")
    parser.add_argument("--go-gnugo", default=GNUGO_LEVEL_1, help="go9: the GTP opponent's command line")
    parser.add_argument("--go-simulations", type=int, default=None,
                        help="go9: play-time simulations (default: the run's planner.play_simulations)")
    parser.add_argument("--go-run-dir", default=None, help="go9: measure this run (trained before) instead of training")
    parser.add_argument("--minatar-minutes", "--breakout-minutes", dest="minatar_minutes", default="30,60",
                        help="minutes at which each MinAtar game is measured; 'best': also MuZero's best "
                             "checkpoint by the in-training tests (what load_agent plays)")
    parser.add_argument("--minatar-episodes", "--breakout-episodes", dest="minatar_episodes", type=int, default=100)
    parser.add_argument("--minatar-max-steps", type=int, default=5_000, help="cap on each evaluation episode")
    parser.add_argument("--minatar-env-step-marks", default="5000000",
                        help="MinAtar (MuZero): also measure the checkpoint written on reaching each of these env-step "
                        "counts, comma-separated (the published curves' 5M); blank: none")
    parser.add_argument("--minatar-sampled", action="store_true",
                        help="MuZero: also evaluate each mark's checkpoint played as in training (moozi eval --sample)")
    parser.add_argument("--chance-minutes", type=float, default=60.0, help="2048, backgammon: minutes to train each agent")
    parser.add_argument("--chance-agents", default="stochastic_muzero,muzero",
                        help="2048, backgammon: agents to train, comma-separated (stochastic_muzero, muzero, alphazero)")
    parser.add_argument("--chance-episodes", type=int, default=100, help="2048: evaluation episodes per agent; backgammon: games against each opponent")
    parser.add_argument("--backgammon-games", default="",
                        help="backgammon: games against an opponent other than --chance-episodes, e.g. pubeval:200 "
                        f"(comma-separated; opponents: {', '.join(BACKGAMMON_OPPONENTS)})")
    parser.add_argument("--chance-random", action="store_true", help="2048: also a random mover on the same seeds")
    parser.add_argument("--agents", default="muzero", help="comma-separated: muzero (the presets), ppo, impala "
                        "(MinAtar games only, on their gymnax twins, the jitted Anakin loop), ppo-host, "
                        "impala-host (MinAtar's own envs through moozi train's driver)")
    parser.add_argument("--ppo-envs", type=int, default=64, help="B of the PPO runs")
    parser.add_argument("--ppo-rollout-steps", type=int, default=128, help="T of the PPO runs")
    parser.add_argument("--impala-envs", type=int, default=32, help="B of the IMPALA runs")
    parser.add_argument("--impala-rollout-steps", type=int, default=20, help="T of the IMPALA runs (its unroll length)")
    parser.add_argument("--ppo-set", dest="ppo_overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a PPOConfig field for PPO runs (repeatable), e.g. learning_rate=5e-4")
    parser.add_argument("--impala-set", dest="impala_overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="an IMPALAConfig field for IMPALA runs (repeatable)")
    parser.add_argument("--note", default=None, help="a sentence stored in the JSON (how the run was made, ...)")
    parser.add_argument("--fresh-seed", action="store_true",
                        help="the seeds chose no preset setting (no ablation or tuning run used them): the results "
                        "page leads with such runs wherever a game has them (bench/results_page.py)")
    parser.add_argument("--work-dir", default=None, help="where runs go (default: a temporary directory)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for every game trained (repeatable), e.g. to try a preset change")
    args = parser.parse_args(argv)
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set needs key=value, got {item!r}")
        OVERRIDES[key.strip()] = value.strip()
    from moozi.config.overrides import parse_set_arguments

    AGENT_OVERRIDES["ppo"].update(parse_set_arguments(args.ppo_overrides))
    AGENT_OVERRIDES["impala"].update(parse_set_arguments(args.impala_overrides))
    agents = [a for a in args.agents.split(",") if a]
    known = ("muzero", "ppo", "impala", "ppo-host", "impala-host")
    if unknown := [a for a in agents if a not in known]:
        parser.error(f"--agents: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    chance_agents = [a for a in args.chance_agents.split(",") if a]
    if unknown := [a for a in chance_agents if a not in CHANCE_AGENTS]:
        parser.error(f"--chance-agents: unknown {', '.join(unknown)}; known: {', '.join(CHANCE_AGENTS)}")
    backgammon_games = {}
    for item in (i for i in args.backgammon_games.split(",") if i):
        opponent, _, count = item.partition(":")
        if opponent not in BACKGAMMON_OPPONENTS or not count.isdigit() or int(count) < 1:
            parser.error(f"--backgammon-games: {item!r} is not OPPONENT:GAMES with OPPONENT one of "
                         f"{', '.join(BACKGAMMON_OPPONENTS)} and GAMES a positive integer")
        backgammon_games[opponent] = int(count)
    games = ["tic_tac_toe"] if args.quick else [g for g in args.games.split(",") if g]
    ttt_minutes = 4.0 if args.quick else args.ttt_minutes
    # Checked before anything trains: a bad mark should not wait for the games before it.
    c4_marks, minatar_marks = _marks(args.c4_marks), _marks(args.minatar_minutes)
    env_step_marks = tuple(int(float(m)) for m in args.minatar_env_step_marks.split(",") if m.strip())
    if "connect_four" in games and args.c4_run_dir is None and all(m == "best" for m in c4_marks):
        parser.error("--c4-marks: name at least one minute to train for (e.g. 60,best)")
    if "connect_four" in games and args.c4_run_dir is not None and args.seeds != 1:
        parser.error("--c4-run-dir measures one run: give --seeds 1")
    minatar_minutes = [m for m in minatar_marks if m != "best"]  # PPO and IMPALA keep no best checkpoint
    if any(g in MINATAR_GAMES for g in games) and not minatar_minutes:
        parser.error("--minatar-minutes: name at least one minute to train for (e.g. 60,best)")
    work = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="moozi-learning-"))
    report: dict = {"benchmark": "learning", **provenance(), "cpu_count": os.cpu_count(), "seeds": args.seeds,
                    "work_dir": str(work), "overrides": dict(OVERRIDES)}
    report["matmul_gflops"] = report["machine"]["matmul_gflops_at_start"]
    if args.note:
        report["note"] = args.note
    report["fresh_seed"] = bool(args.fresh_seed)
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        if "tic_tac_toe" in games:
            report.setdefault("tic_tac_toe", []).append(tic_tac_toe(seed, ttt_minutes, work))
        if "connect_four" in games:
            counts = [None if c == "play" else int(c) for c in args.c4_simulations.split(",") if c]
            opponents = [o for o in args.c4_opponents.split(",") if o]
            run_dir = pathlib.Path(args.c4_run_dir) if args.c4_run_dir else None
            report.setdefault("connect_four", []).append(
                connect_four(seed, c4_marks, work, args.c4_games, args.c4_solver_games, args.c4_agent, counts,
                             opponents, run_dir))
        if "go9" in games:
            if args.go_run_dir is not None and args.seeds != 1:
                parser.error("--go-run-dir measures one run: give --seeds 1")
            report.setdefault("go9", []).append(go9(
                seed, args.go_minutes, work, args.go_games, args.go_gnugo_games, args.go_gnugo, args.go_simulations,
                pathlib.Path(args.go_run_dir) if args.go_run_dir else None))
        for game in (g for g in CHANCE_GAMES if g in games):
            for agent in chance_agents:
                report.setdefault(game, []).append(
                    chance_game(game, agent, seed, args.chance_minutes, work, args.chance_episodes,
                                backgammon_games))
            if args.chance_random and game == "2048":  # backgammon plays random and pipcount anyway
                report.setdefault(f"{game}:random", []).append(
                    dict(random_mover_2048(args.chance_episodes, seed * 1000), seed=seed))
        for game in (g for g in MINATAR_GAMES if g in games):
            if "muzero" in agents:
                report.setdefault(game, []).append(
                    minatar(game, seed, minatar_marks, work, args.minatar_episodes, args.minatar_max_steps,
                            sampled=args.minatar_sampled, env_step_marks=env_step_marks))
            for agent in ("ppo", "impala"):
                if agent in agents:
                    report.setdefault(f"{game}:{agent}", []).append(model_free_minatar(
                        agent, game, seed, minatar_minutes, args.minatar_episodes, args.minatar_max_steps,
                        getattr(args, f"{agent}_envs"), getattr(args, f"{agent}_rollout_steps")))
                if f"{agent}-host" in agents:
                    report.setdefault(f"{game}:{agent}-host", []).append(
                        minatar(game, seed, minatar_minutes, work, args.minatar_episodes, args.minatar_max_steps, agent))
    report["load_average_1min"] = os.getloadavg()[0]
    for game in ("tic_tac_toe", "connect_four", "go9", *CHANCE_GAMES, *(f"{g}:random" for g in CHANCE_GAMES), *MINATAR_GAMES, *(f"{g}:{a}" for a in ("ppo", "impala", "ppo-host", "impala-host") for g in MINATAR_GAMES)):
        for row in report.get(game, []):
            print(game, json.dumps(row), file=sys.stderr)
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
