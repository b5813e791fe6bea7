"""The Anakin path vs the host path: self-play env steps/s of a JAX-native game and its host twin (issue 5).

    python bench/anakin.py [--quick] [--pairs connect_four,breakout] [--rounds 8] [--steps T] [--set key=value ...]

Pairs (each measured in the same run, the runners taking turns):
- connect_four: pgx:connect_four on the Anakin worker (env step, history,
  search and step samples for B envs over T steps in one jitted program) vs
  OpenSpiel Connect Four on the host worker (`TrainingRolloutWorker`: one
  jitted act per step, envs stepped on the host);
- breakout: gymnax:Breakout-MinAtar (Anakin) vs the `minatar` library's
  Breakout (host).
Both sides of a pair use the preset of the host game (`connect_four`,
`breakout`): the same network, simulations, batch B and segment length T =
`train.rollout_steps`; sticky actions 0.1 on both Breakouts. Each side gets
its own freshly initialised parameters from the same seed (pgx's Connect Four
observation has 2 planes, OpenSpiel's 3, so the first layer differs by one
input plane). A side's time is its worker's whole `run` call: acting, env
steps and cutting the steps into trajectories; building and the first
(compiling) call are excluded. The runners take turns for several rounds and
each one's best round counts (load from others favours none of them); the
ratio of the medians is reported beside it. On a loaded machine wall-clock
rounds swing by tens of percent, so each round's CPU time (this process, all
threads; both sides step their envs in this process) is kept too:
`anakin_vs_host_cpu` is the ratio of env steps per CPU-second, best rounds.
What bounds the gain: the Anakin path removes the host worker's time outside
its acting calls (env steps, copying, cutting trajectories), `host_run_over_act`
= host run time / host acting time, plus per-call costs inside them (dispatch,
copying the parameters to the device every step). Where the search dominates
(the presets on a CPU) both are small and the ratio stays close to 1.
Without --quick a third runner per pair, the host worker on the JAX twin
(a jitted vmapped env step per step), separates the gain of one compiled
loop from the difference between the env libraries. `--set` applies config
overrides to both sides (e.g. a cheaper search, to see the path's overheads).
Prints a table, then ONE JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from moozi.config import Config, build_config, preset_overrides  # noqa: E402

# pair -> (preset of the host game, JAX-native twin)
PAIRS = {"connect_four": ("connect_four", "pgx:connect_four"), "breakout": ("breakout", "gymnax:Breakout-MinAtar")}
QUICK = {"rounds": 2, "steps": 4}


def _configs(pair: str, steps: int | None, extra: dict[str, str]) -> dict[str, Config]:
    preset, twin = PAIRS[pair]
    overrides = dict(extra) if steps is None else {**extra, "train.rollout_steps": steps}
    host = build_config(preset, overrides=overrides)
    anakin = build_config(twin, overrides={**preset_overrides(preset), **overrides})
    return {"host": host, "anakin": anakin}


def _params(config: Config):
    from moozi.core.train_step import init_train_state
    from moozi.builders import build_network, env_spec, example_stacked_obs, seed_key

    spec = env_spec(config)
    state = init_train_state(build_network(config, spec), config.optimizer, seed_key(0, 0), example_stacked_obs(config, spec))
    return jax.device_get({"params": state.params, "batch_stats": state.batch_stats})


def bench_pair(pair: str, rounds: int, steps: int | None, same_env_host: bool, extra: dict[str, str]) -> dict:
    from moozi.training.roles.anakin_self_play import AnakinRolloutWorker
    from moozi.training.roles.self_play import TrainingRolloutWorker

    configs = _configs(pair, steps, extra)
    runners = {
        "anakin": (AnakinRolloutWorker, configs["anakin"]),
        "host": (TrainingRolloutWorker, configs["host"]),
    }
    if same_env_host:
        runners["host_same_env"] = (TrainingRolloutWorker, configs["anakin"])
    workers, params, warmup = {}, {}, {}
    num_steps = configs["host"].train.rollout_steps
    try:
        for name, (cls, config) in runners.items():
            workers[name] = cls(config, 0)
            params[name] = _params(config)
            start = time.perf_counter()
            workers[name].run(params[name], num_steps, 0)  # compiles, starts the envs
            warmup[name] = time.perf_counter() - start
            print(f"  {pair}/{name}: {config.game} warm-up {warmup[name]:.1f} s", file=sys.stderr, flush=True)
        times = {name: [] for name in runners}
        cpu = {name: [] for name in runners}
        act = {name: [] for name in runners}
        for _ in range(rounds):
            for name, worker in workers.items():
                start, start_cpu = time.perf_counter(), time.process_time()
                result = worker.run(params[name], num_steps, 0)
                times[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
                act[name].append(result.metrics["act_seconds"])
    finally:
        for worker in workers.values():
            worker.close()
    config = configs["host"]
    batch_steps = config.env.num_envs * num_steps
    out = {
        "host_game": config.game,
        "anakin_game": configs["anakin"].game,
        "num_envs": config.env.num_envs,
        "rollout_steps": num_steps,
        "num_simulations": config.planner.num_simulations,
        "network": config.network.kind,
        "rounds": rounds,
    }
    for name in runners:
        out[f"{name}_steps_per_s"] = batch_steps / min(times[name])
        out[f"{name}_median_steps_per_s"] = batch_steps / statistics.median(times[name])
        out[f"{name}_steps_per_cpu_s"] = batch_steps / min(cpu[name])
        out[f"{name}_warmup_s"] = warmup[name]
    out["anakin_vs_host"] = out["anakin_steps_per_s"] / out["host_steps_per_s"]
    out["anakin_vs_host_median"] = out["anakin_median_steps_per_s"] / out["host_median_steps_per_s"]
    out["anakin_vs_host_cpu"] = out["anakin_steps_per_cpu_s"] / out["host_steps_per_cpu_s"]
    # The host run time over its time inside acting calls: what removing everything else would gain.
    out["host_run_over_act"] = sum(times["host"]) / sum(act["host"])
    out["host_ms_per_batch_step"] = 1e3 * min(times["host"]) / num_steps
    out["host_outside_acting_ms_per_batch_step"] = 1e3 * (sum(times["host"]) - sum(act["host"])) / (rounds * num_steps)
    if same_env_host:
        out["anakin_vs_host_same_env"] = out["anakin_steps_per_s"] / out["host_same_env_steps_per_s"]
        out["anakin_vs_host_same_env_cpu"] = out["anakin_steps_per_cpu_s"] / out["host_same_env_steps_per_cpu_s"]
    return out


def _table(results: dict) -> str:
    columns = ("B", "T", "sims", "anakin/s", "host/s", "host(jax env)/s", "anakin/host", "(medians)", "(CPU s)", "run/act")
    widths = (5, 4, 6, 11, 10, 17, 13, 11, 9, 9)
    lines = [f"{'pair':<14}" + "".join(f"{c:>{w}}" for c, w in zip(columns, widths))]
    for pair, r in results.items():
        same = r.get("host_same_env_steps_per_s")
        cells = (
            r["num_envs"], r["rollout_steps"], r["num_simulations"], f"{r['anakin_steps_per_s']:.1f}",
            f"{r['host_steps_per_s']:.1f}", f"{same:.1f}" if same else "-", f"{r['anakin_vs_host']:.3f}x",
            f"{r['anakin_vs_host_median']:.3f}x", f"{r['anakin_vs_host_cpu']:.3f}x", f"{r['host_run_over_act']:.3f}x",
        )
        lines.append(f"{pair:<14}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
    for pair, r in results.items():
        lines.append(
            f"{pair}: anakin {r['anakin_game']} vs host {r['host_game']}; the host spends "
            f"{r['host_outside_acting_ms_per_batch_step']:.2f} of {r['host_ms_per_batch_step']:.1f} ms per batch step "
            "outside its acting calls"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds of T=4 steps, no same-env host runner")
    parser.add_argument("--pairs", default=",".join(PAIRS), help="comma-separated subset of " + ", ".join(PAIRS))
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per runner; the best counts (8; quick 2)")
    parser.add_argument("--steps", type=int, default=None, help="T, steps per run call (default: the preset's rollout_steps; quick 4)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override for both sides")
    args = parser.parse_args(argv)
    rounds = args.rounds or (QUICK["rounds"] if args.quick else 8)
    steps = args.steps or (QUICK["steps"] if args.quick else None)
    extra = dict(item.split("=", 1) for item in args.set)
    results = {}
    for pair in [p for p in args.pairs.split(",") if p]:
        if pair not in PAIRS:
            parser.error(f"unknown pair {pair!r}; known: {', '.join(PAIRS)}")
        print(f"benchmarking {pair}", file=sys.stderr, flush=True)
        results[pair] = bench_pair(pair, rounds, steps, same_env_host=not args.quick, extra=extra)
    print(_table(results))
    print(f"device {jax.default_backend()}, load average (1 min) {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    report = {
        "benchmark": "anakin",
        "device": f"{jax.default_backend()}:{jax.devices()[0].device_kind}",
        "quick": args.quick,
        "cpu_count": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
        "overrides": extra,
        "anakin_vs_host": {pair: round(r["anakin_vs_host"], 4) for pair, r in results.items()},
        "anakin_vs_host_cpu": {pair: round(r["anakin_vs_host_cpu"], 4) for pair, r in results.items()},
        "pairs": {pair: {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()} for pair, r in results.items()},
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
