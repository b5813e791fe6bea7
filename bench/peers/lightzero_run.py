"""Runs LightZero's tic-tac-toe MuZero config on CPU and reports its speed (run by lightzero.sh).

    python lightzero_run.py train  --work-dir DIR [--mode sp|bot] [--simulations 25] [--seed 0]
    python lightzero_run.py report --work-dir DIR

Runs in LightZero's own venv (it never imports moozi). `train` runs LightZero's
own `train_muzero` entry on its zoo config, changed only where this machine
needs it (CPU, a run directory), and appends one JSON line per collect and per
evaluation to DIR/events.jsonl as they happen, so a run cut off by a time limit
still leaves its record. `report` reads that record and LightZero's own
collector log and prints ONE JSON object on its last line.

The record comes from wrapping two LightZero methods (timing only, no change in
behaviour): `MuZeroCollector.collect` (wall time and env steps of each call) and
`VectorEvalMonitor.get_episode_return` (the returns of each evaluation).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import sys
import time

EVENTS = "events.jsonl"
EXP_NAME = "lightzero"  # LightZero writes its logs under ./<exp_name>/ relative to the working directory


def _append(work: pathlib.Path, event: dict) -> None:
    with open(work / EVENTS, "a") as f:
        f.write(json.dumps(event) + "\n")
        f.flush()


def train(args) -> None:
    import importlib

    from ding.worker.collector import base_serial_evaluator
    from lzero.entry import train_muzero
    from lzero.worker import MuZeroCollector, MuZeroEvaluator

    work = pathlib.Path(args.work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / EVENTS).unlink(missing_ok=True)
    module = importlib.import_module(f"zoo.board_games.tictactoe.config.tictactoe_muzero_{args.mode}_mode_config")
    main_config, create_config = module.main_config, module.create_config
    main_config.exp_name = EXP_NAME
    main_config.policy.cuda = False
    main_config.policy.num_simulations = args.simulations
    os.chdir(work)
    started = time.time()
    _append(work, {"event": "start", "time": started, "mode": args.mode, "simulations": args.simulations,
                   "collector_env_num": main_config.env.collector_env_num,
                   "torch_threads": __import__("torch").get_num_threads(),
                   "omp_num_threads": os.environ.get("OMP_NUM_THREADS")})

    collect = MuZeroCollector.collect

    def timed_collect(self, *a, **kw):
        steps_before, t0, cpu0 = self.envstep, time.time(), time.process_time()
        out = collect(self, *a, **kw)
        t1, cpu1 = time.time(), time.process_time()
        _append(work, {"event": "collect", "start": t0 - started, "seconds": t1 - t0, "cpu_seconds": cpu1 - cpu0,
                       "total_cpu_seconds": cpu1, "env_steps": self.envstep - steps_before,
                       "total_env_steps": self.envstep})
        return out

    returns_seen: list = []
    get_returns = base_serial_evaluator.VectorEvalMonitor.get_episode_return

    def recorded_returns(self):
        out = get_returns(self)
        returns_seen[:] = list(out)
        return out

    evaluate = MuZeroEvaluator.eval

    def timed_eval(self, save_ckpt_fn=None, train_iter=-1, envstep=-1, *a, **kw):
        t0 = time.time()
        out = evaluate(self, save_ckpt_fn, train_iter, envstep, *a, **kw)
        t1 = time.time()
        mean = sum(float(r) for r in returns_seen) / len(returns_seen) if returns_seen else None
        _append(work, {"event": "eval", "start": t0 - started, "end": t1 - started, "seconds": t1 - t0,
                       "train_iter": train_iter, "env_steps": envstep, "return_mean": mean})
        return out

    MuZeroCollector.collect = timed_collect
    MuZeroEvaluator.eval = timed_eval
    base_serial_evaluator.VectorEvalMonitor.get_episode_return = recorded_returns
    train_muzero([main_config, create_config], seed=args.seed, model_path=None, max_env_step=int(1e9))


def _collector_log_rate(work: pathlib.Path) -> float | None:
    """LightZero's own `avg_envstep_per_sec` (env steps / collect time), averaged over its log blocks."""
    path = next(iter(work.glob(f"{EXP_NAME}*/log/collector/collector_logger.txt")), None)
    if path is None:
        return None
    rates = [float(m) for m in re.findall(r"^avg_envstep_per_sec: ([0-9.eE+-]+)$", path.read_text(), re.M)]
    return sum(rates) / len(rates) if rates else None


def report(args) -> dict:
    work = pathlib.Path(args.work_dir).resolve()
    path = work / EVENTS
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    start = next((e for e in events if e["event"] == "start"), None)
    if start is None:
        out = {"peer": "lightzero", "error": f"LightZero never started training; see {work / 'train.log'}"}
        print(json.dumps(out))
        return out
    collects = [e for e in events if e["event"] == "collect"]
    evals = [e for e in events if e["event"] == "eval" and e["return_mean"] is not None]
    collect_steps = sum(e["env_steps"] for e in collects)
    collect_seconds = sum(e["seconds"] for e in collects)
    collect_cpu = sum(e["cpu_seconds"] for e in collects)
    # The whole-run rate: env steps collected by the end of the last collect, over the wall time
    # since `train_muzero` was called (building envs and model, learning and evaluating included;
    # Python imports not).
    last = collects[-1] if collects else None
    best = max(evals, key=lambda e: (e["return_mean"], -e["end"])) if evals else None
    out = {
        "peer": "lightzero",
        "lightzero_version": _version("lightzero"),
        "torch_version": _version("torch"),
        "config": f"zoo/board_games/tictactoe/config/tictactoe_muzero_{start['mode']}_mode_config.py",
        "num_simulations": start["simulations"],
        "collector_env_num": start["collector_env_num"],
        "torch_threads": start["torch_threads"],
        "omp_num_threads": start.get("omp_num_threads"),
        "collects": len(collects),
        "collect_env_steps_per_s": round(collect_steps / collect_seconds, 2) if collect_seconds else None,
        "collector_log_envstep_per_sec": _round(_collector_log_rate(work)),
        # Per CPU-second of the main process (search and network run there; the env workers'
        # share is not counted): steadier than wall time on a loaded machine.
        "collect_env_steps_per_cpu_s": round(collect_steps / collect_cpu, 2) if collect_cpu else None,
        "whole_run_env_steps_per_s": round(last["total_env_steps"] / (last["start"] + last["seconds"]), 2) if last else None,
        "whole_run_env_steps_per_cpu_s": round(last["total_env_steps"] / last["total_cpu_seconds"], 2) if last else None,
        "env_steps": last["total_env_steps"] if last else 0,
        "evaluations": [{"minutes": round(e["end"] / 60, 2), "train_iter": e["train_iter"], "env_steps": e["env_steps"],
                         "return_mean": e["return_mean"]} for e in evals],
        "best_eval_return": best["return_mean"] if best else None,
        "minutes_to_best_eval": round(best["end"] / 60, 2) if best else None,
        "load_average_1min": os.getloadavg()[0],
    }
    print(json.dumps(out))
    return out


def _round(x):
    return None if x is None else round(x, 2)


def _version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["train", "report"])
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--mode", choices=["sp", "bot"], default="sp",
                        help="sp: self-play, one search per move, as moozi's self-play; bot: the agent against LightZero's rule bot")
    parser.add_argument("--simulations", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "train":
        train(args)
    else:
        report(args)


if __name__ == "__main__":
    sys.exit(main())
