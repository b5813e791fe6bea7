"""Self-play and learner throughput at the presets, and compute efficiency (issue 5).

    python bench/selfplay.py [--quick] [--games tic_tac_toe,connect_four,breakout,cartpole]
                             [--whole-run-minutes 2]

- selfplay: env steps/s of the training rollout worker the driver builds for the
  preset (its B envs, its search, its simulations), warm-up (compiling, env
  start-up) excluded; tic-tac-toe also at 25 PUCT simulations, the setting of
  the LightZero comparison (bench/peers/lightzero.sh);
- whole run (tic-tac-toe): env steps over the wall time of a short real
  `Driver` run (building the roles, compiling, learning, testing included),
  and the mean env steps/s of its logged windows (metrics.jsonl);
- learner: parameter updates/s of the parameter optimizer role at the preset's
  batch and unroll, on batches sampled from a replay buffer of synthetic
  episodes (the update's cost does not depend on the values);
- compute efficiency (breakout): the network FLOP/s that self-play achieves,
  FLOPs per acting step from XLA's cost analysis of the compiled program
  times acting steps/s, divided by the FLOP/s of a large float32 matmul
  measured in the same run.
Each timed part runs several rounds and its best round counts; on a loaded
machine the rates per CPU-second of this process are reported beside the
wall-clock ones. Prints a table, then ONE JSON object on its last line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from moozi.cli import enable_compilation_cache  # noqa: E402
from moozi.config import Config, build_config  # noqa: E402

GAMES = ("tic_tac_toe", "connect_four", "breakout", "cartpole")
# The LightZero comparison (issue 5): its tic-tac-toe MuZero searches 25 PUCT simulations.
PEER_OVERRIDES = {"planner.search_policy": "muzero", "planner.num_simulations": 25}
EFFICIENCY_GAME = "breakout"


# ---------------------------------------------------------------- self-play


def selfplay(config: Config, params, steps: int, rounds: int) -> dict:
    """Env steps/s of one training rollout worker; the best of `rounds` calls of `steps` batch steps."""
    from moozi.training.roles.self_play import TrainingRolloutWorker

    worker = TrainingRolloutWorker(config)
    try:
        start = time.perf_counter()
        worker.run(params, 2, 0)  # compiles acting, starts the envs, takes the first reset
        warmup = time.perf_counter() - start
        best, best_act, best_cpu = 0.0, 0.0, 0.0
        for _ in range(rounds):
            start, cpu = time.perf_counter(), time.process_time()
            result = worker.run(params, steps, 0)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            best = max(best, result.env_steps / seconds)
            best_act = max(best_act, result.env_steps / result.metrics["act_seconds"])
            best_cpu = max(best_cpu, result.env_steps / cpu)
    finally:
        worker.close()
    return {
        "env_steps_per_s": best,
        "batch_steps_per_s": best / config.env.num_envs,
        # acting alone (history + inference + search + copying the answer out), per env step
        "acting_env_steps_per_s": best_act,
        # per CPU-second of this process (all its threads): steadier than wall time under load
        "env_steps_per_cpu_s": best_cpu,
        "num_envs": config.env.num_envs,
        "num_simulations": config.planner.num_simulations,
        "search_policy": config.planner.search_policy.value,
        "warmup_seconds": warmup,
    }


def whole_run(config: Config, minutes: float) -> dict:
    """A real `moozi train` run (inline backend) of `minutes`: env steps over its whole wall time."""
    from moozi.runs.metrics_log import read_metrics
    from moozi.training.driver import Driver

    config = dataclasses.replace(config, train=dataclasses.replace(config.train, max_minutes=minutes))
    with tempfile.TemporaryDirectory(prefix="moozi-bench-run-") as run_dir:
        start, cpu = time.perf_counter(), time.process_time()
        driver = Driver(config, run_dir, progress=False)
        try:
            result = driver.run()
        finally:
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            driver.close()
        rows = [r for r in read_metrics(run_dir) if r.get("role") != "test" and "env_steps_per_s" in r]
    windows = [r["env_steps_per_s"] for r in rows]
    return {
        "minutes": minutes,
        "env_steps": int(result["env_steps"]),
        "updates": int(result["updates"]),
        "wall_seconds": seconds,
        "whole_run_env_steps_per_s": result["env_steps"] / seconds,
        "whole_run_env_steps_per_cpu_s": result["env_steps"] / cpu,
        "logged_env_steps_per_s": float(np.mean(windows)) if windows else None,
        "updates_per_s": result["updates"] / seconds,
        "num_simulations": config.planner.num_simulations,
        "search_policy": config.planner.search_policy.value,
    }


# ---------------------------------------------------------------- learner


def _synthetic_episode(spec, length: int, rng: np.random.Generator):
    """One finished episode of the game's shapes with random contents."""
    from moozi.core.types import Trajectory

    A = spec.num_actions
    legal = np.ones((length, A), bool)
    legal[:, 0] = False
    legal[-1] = False
    legal[-1, 0] = True  # only the dummy action is legal at the last step
    action = rng.integers(1, A, length).astype(np.int32)
    action[-1] = 0
    probs = rng.random((length, A)).astype(np.float32) * legal
    obs = rng.random((length, *spec.obs_shape)) < 0.3
    return Trajectory(
        obs=obs.astype(np.uint8 if spec.binary_obs else np.float32),
        action=action,
        reward=rng.normal(size=length).astype(np.float32),
        is_first=np.arange(length) == 0,
        is_last=np.arange(length) == length - 1,
        legal_actions=legal,
        to_play=(np.arange(length) % 2 if spec.is_two_player else np.full(length, -1)).astype(np.int32),
        root_value=rng.uniform(-1, 1, length).astype(np.float32),
        action_probs=probs / probs.sum(-1, keepdims=True),
    )


def learner(config: Config, updates: int, rounds: int):
    """(parameter updates/s at the preset's batch and unroll, acting params, replay bytes per step)."""
    from moozi.builders import env_spec
    from moozi.training.roles.parameter_optimizer import ParameterOptimizer
    from moozi.training.roles.replay_buffer import ReplayRole

    spec = env_spec(config)
    optimizer = ParameterOptimizer(config)
    replay = ReplayRole(config)
    rng = np.random.default_rng(config.seed)
    length = min(spec.max_episode_steps or 50, 50)
    while len(replay.buffer) < max(config.replay.min_fill, config.train.batch_size):
        replay.buffer.add(_synthetic_episode(spec, length, rng))
    batches = replay.sample_batches(updates, config.train.batch_size)
    start = time.perf_counter()
    optimizer.update(batches[:1])  # compiles the train step
    compile_seconds = time.perf_counter() - start
    best = 0.0
    for _ in range(rounds):
        result = optimizer.update(batches)
        best = max(best, len(batches) / result.seconds)
    return {
        "updates_per_s": best,
        "batch_size": config.train.batch_size,
        "unroll_steps": config.targets.num_unroll_steps,
        "compile_seconds": compile_seconds,
    }, optimizer.get_params(), float(replay.buffer.bytes_per_step())


# ---------------------------------------------------------------- compute efficiency


def flops_of(analysed) -> float:
    """FLOPs from a Compiled's or Lowered's `cost_analysis()` (0 where XLA gives none)."""
    try:
        analysis = analysed.cost_analysis()
    except Exception:  # a backend without cost analysis: report 0, keep the times
        return 0.0
    if isinstance(analysis, (list, tuple)):  # older JAX: one dict per device program
        analysis = analysis[0] if analysis else None
    return float((analysis or {}).get("flops", 0.0))


def acting_flops(config: Config, params) -> dict:
    """Network FLOPs of one acting step (B envs), from XLA's cost analysis of compiled programs.

    XLA's cost analysis counts a while loop's body once: it does not know the trip
    count. mctx runs its simulations in a `fori_loop`, so the analysis of the whole
    acting program holds the root inference and ONE simulation's recurrent inference
    (checked on every run on the unoptimised programs: N simulations analyse to the
    FLOPs of 1, give or take the tree's bookkeeping; compiled, breakout preset, B = 32:
    948.07 M FLOPs at 16 simulations, 947.99 M at 2, initial + recurrent = 946.1 M). The FLOPs
    per step are therefore counted from the network's two programs at the same
    batch: initial + N x recurrent inference. The acting program's own analysis is
    reported beside them, with its difference to initial + 1 recurrent (the search's
    arithmetic outside the network: history stacking, PUCT, backups).
    """
    from moozi.core.acting import make_muzero_act
    from moozi.envs.base import StepOutput
    from moozi.core.history import init_history
    from moozi.builders import build_network, env_spec, example_stacked_obs

    spec = env_spec(config)
    network = build_network(config, spec)
    B, N = config.env.num_envs, config.planner.num_simulations
    legal = np.ones((B, spec.num_actions), bool)
    legal[:, 0] = False
    step = StepOutput(
        obs=np.zeros((B, *spec.obs_shape), np.float32), is_first=np.ones(B, bool), is_last=np.zeros(B, bool),
        reward=np.zeros(B, np.float32), legal_actions=legal, to_play=np.full(B, -1, np.int32),
    )
    history = init_history(B, config.targets.history_length, spec.obs_shape)

    def lowered_act(simulations: int):
        planner = dataclasses.replace(config.planner, num_simulations=simulations)
        act = jax.jit(make_muzero_act(network, planner, spec, config.targets.history_length))
        return act.lower(params, history, step, np.zeros(B, np.int32), None, jax.random.key(0))

    initial = flops_of(jax.jit(network.initial_inference).lower(params, example_stacked_obs(config, spec, B)).compile())
    hidden = jnp.zeros((B, *network.hidden_state_shape), jnp.float32)
    recurrent = flops_of(jax.jit(network.recurrent_inference).lower(params, hidden, jnp.zeros(B, jnp.int32)).compile())
    preset = flops_of(lowered_act(N).compile())
    # The loop check compares the unoptimised programs (no compiling): N vs 1 simulation.
    unoptimised_n, unoptimised_1 = flops_of(lowered_act(N)), flops_of(lowered_act(1))
    return {
        "network_flops_per_step": initial + N * recurrent,
        "initial_inference_flops": initial,
        "recurrent_inference_flops": recurrent,
        "act_program_flops_analysed": preset,
        "loop_body_counted_once": (bool(abs(unoptimised_n - unoptimised_1) < 0.5 * recurrent)
                                   if unoptimised_n and unoptimised_1 else None),
        "search_overhead_flops_analysed": preset - initial - recurrent,
    }


def matmul_flops_per_s(n: int, rounds: int) -> float:
    """Dense float32 matmul FLOP/s on this machine: one jitted n x n @ n x n, best of `rounds`."""
    keys = jax.random.split(jax.random.key(0), 2)
    a = jax.random.normal(keys[0], (n, n), jnp.float32)
    b = jax.random.normal(keys[1], (n, n), jnp.float32)
    dot = jax.jit(jnp.dot)
    dot(a, b).block_until_ready()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        dot(a, b).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2.0 * n**3 / best


# ---------------------------------------------------------------- main


def _rounded(value):
    if isinstance(value, float):
        return round(value, 4) if abs(value) < 1e6 else float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and updates, a 1-minute whole run")
    parser.add_argument("--games", default=",".join(GAMES), help="comma-separated presets")
    parser.add_argument("--whole-run-minutes", type=float, default=None, help="tic-tac-toe Driver run (2; quick 1)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds, the best counts (3; quick 2)")
    args = parser.parse_args(argv)
    # The CLI's cache: the acting program compiled by the rollout worker is found again for its
    # cost analysis instead of recompiled.
    enable_compilation_cache()
    games = [g for g in args.games.split(",") if g]
    rounds = args.rounds or (2 if args.quick else 3)
    steps = 8 if args.quick else 32  # batch steps per timed self-play round
    updates = 2 if args.quick else 8  # parameter updates per timed learner round
    whole_minutes = args.whole_run_minutes or (1.0 if args.quick else 2.0)

    report: dict = {"benchmark": "selfplay", "quick": args.quick, "cpu_count": os.cpu_count(),
                    "load_average_1min_before": os.getloadavg()[0], "selfplay": {}, "learner": {},
                    "bytes_per_stored_step": {}}
    params_by_game = {}
    for game in games:
        config = build_config(game)
        print(f"{game}: learner (B={config.train.batch_size}, K={config.targets.num_unroll_steps})", file=sys.stderr)
        report["learner"][game], params_by_game[game], report["bytes_per_stored_step"][game] = learner(
            config, updates, rounds)
        print(f"{game}: self-play (B={config.env.num_envs}, {config.planner.num_simulations} simulations)",
              file=sys.stderr)
        report["selfplay"][game] = selfplay(config, params_by_game[game], steps, rounds)
        if game == "tic_tac_toe":
            peer = build_config(game, overrides=PEER_OVERRIDES)
            report["selfplay"]["tic_tac_toe_25_simulations"] = selfplay(peer, params_by_game[game], steps, rounds)
            print(f"{game}: a {whole_minutes}-minute Driver run at 25 simulations", file=sys.stderr)
            report["whole_run"] = {"tic_tac_toe_25_simulations": whole_run(peer, whole_minutes)}
            if not args.quick:
                report["whole_run"]["tic_tac_toe"] = whole_run(config, whole_minutes)

    if EFFICIENCY_GAME in games:
        config = build_config(EFFICIENCY_GAME)
        flops = acting_flops(config, params_by_game[EFFICIENCY_GAME])
        peak = matmul_flops_per_s(2048, 5 if args.quick else 10)
        sp = report["selfplay"][EFFICIENCY_GAME]
        achieved = flops["network_flops_per_step"] * sp["batch_steps_per_s"]
        achieved_acting = flops["network_flops_per_step"] * sp["acting_env_steps_per_s"] / sp["num_envs"]
        report["compute_efficiency"] = {
            "game": EFFICIENCY_GAME,
            **flops,
            "matmul_flops_per_s": peak,
            "selfplay_network_flops_per_s": achieved,
            "efficiency": achieved / peak,
            "acting_only_efficiency": achieved_acting / peak,
        }
    report["load_average_1min_after"] = os.getloadavg()[0]

    lines = [f"{'game':<28}{'env steps/s':>12}{'per CPU-s':>10}{'acting only':>12}{'B':>5}{'sims':>6}{'updates/s':>11}"]
    for name, row in report["selfplay"].items():
        learn = report["learner"].get(name, {}).get("updates_per_s")
        lines.append(f"{name:<28}{row['env_steps_per_s']:12.1f}{row['env_steps_per_cpu_s']:10.1f}"
                     f"{row['acting_env_steps_per_s']:12.1f}{row['num_envs']:5d}{row['num_simulations']:6d}"
                     + (f"{learn:11.3f}" if learn else ""))
    for name, row in report.get("whole_run", {}).items():
        lines.append(f"whole run {name}: {row['env_steps']} env steps, {row['updates']} updates in "
                     f"{row['wall_seconds']:.0f} s = {row['whole_run_env_steps_per_s']:.1f} env steps/s")
    if "compute_efficiency" in report:
        c = report["compute_efficiency"]
        lines.append(f"compute efficiency ({c['game']}): {c['selfplay_network_flops_per_s'] / 1e9:.2f} GFLOP/s "
                     f"in self-play / {c['matmul_flops_per_s'] / 1e9:.1f} GFLOP/s matmul = {c['efficiency']:.3f}")
    print("\n".join(lines))
    report = _rounded(report)
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
