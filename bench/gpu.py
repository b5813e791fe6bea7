"""moozi on one GPU (issue 36): one command that trains and measures, sized for ~8 minutes on an H100.

(An estimate from the time limits it sets; docs/gpu.md says what has been measured.)

    python bench/gpu.py --out DIR [--wheels WHEELS] [--tiny] [--json FILE] [--dtype bfloat16]
                        [--only ppo,alphazero,muzero,core] [--minutes M] [--ppo-env-steps N] ...

On the default JAX device (a GPU where jax has CUDA; the device's name is in the JSON):
- ppo: PPO on gymnax Breakout-MinAtar on the Anakin path, as `moozi train gymnax:Breakout-MinAtar
  --set agent=ppo` runs it (PPO's default settings), for `--ppo-env-steps` env steps or
  `--ppo-minutes`, whichever comes first;
- alphazero, muzero: `moozi train connect_four` with agent=alphazero, and agent=muzero on its pgx
  twin (`game=pgx:connect_four`), both on the Anakin path, for `--minutes` each, with the preset's
  settings but `--envs` self-play envs and `--batch` targets per update (by default 8x the preset's
  32 and 128: the same samples per env step, at a size that fills a GPU);
- core: bench/core.py's acting (history, inference, search) and train step at `--core-batch`.
Each run's directory (config, metrics, checkpoints) is kept under --out, to bring back and evaluate
(docs/gpu.md). The rates of a run: env steps and updates over its whole wall-clock (compiling,
tests and checkpoints included), and the median of its metrics.jsonl windows after the first
(`steady_*`, compiling excluded); `compile_seconds` is XLA's compile time (tracing, lowering,
compiling) summed over the run from jax.monitoring's events, on every thread.
`--tiny` shrinks everything (tiny networks, a few envs, seconds per run) to check the script end
to end on a CPU in a few minutes. `--wheels WHEELS` first installs every wheel in WHEELS from
there alone (`pip install --no-index --find-links WHEELS WHEELS/*.whl`), for a machine without an
index (docs/gpu.md says how to make WHEELS). Writes ONE JSON object to --json (default
OUT/gpu.json) and prints it on its last line.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUNS = ("ppo", "alphazero", "muzero", "core")
# jax.monitoring's events for the stages of compiling one program (jax/_src/dispatch.py).
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
# Shrinks a run to seconds on a CPU: tiny MLPs, a few envs, few simulations (tests/helpers/tiny.py's sizes).
TINY_BOARD = {
    "network.kind": "mlp", "network.mlp_hidden_sizes": (16,), "network.mlp_hidden_state_size": 8,
    "network.head_hidden": 16, "planner.num_simulations": 4, "planner.play_simulations": None,
    "train.rollout_steps": 6, "train.updates_per_iteration": 2, "train.log_every_updates": 2,
    "train.test_every_updates": 8, "train.test_episodes": 4, "replay.min_fill": 40, "replay.capacity": 2000,
}
TINY_PPO = {"ppo.num_envs": 4, "ppo.rollout_steps": 8, "ppo.mlp_hidden_sizes": (16,), "ppo.num_minibatches": 2,
            "ppo.num_epochs": 1, "train.test_every_updates": 4, "train.test_episodes": 2, "train.test_max_steps": 50,
            "train.log_every_updates": 2}


class CompileClock:
    """Seconds XLA spent compiling while the clock is open (`with CompileClock() as clock`), on every thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self.seconds = 0.0

    def __enter__(self):
        import jax

        jax.monitoring.register_event_duration_secs_listener(self._record)
        return self

    def __exit__(self, *exc):
        import jax

        jax.monitoring.unregister_event_duration_listener(self._record)

    def _record(self, event: str, duration: float, **_):
        if event in COMPILE_EVENTS:
            with self._lock:
                self.seconds += duration


def install_wheels(directory: str) -> None:
    """Every wheel in `directory`, its dependencies from there too: no index is asked."""
    wheels = sorted(glob.glob(os.path.join(directory, "*.whl")))
    if not wheels:
        raise SystemExit(f"--wheels {directory}: no .whl files there")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links", directory, *wheels], check=True)


def train(name: str, game: str, overrides: dict, out: pathlib.Path, clock: CompileClock) -> dict:
    """One `moozi train` run in this process (the CLI's driver); its rates from the summary and the log."""
    from moozi.config import build_config
    from moozi.runs.metrics_log import read_metrics
    from moozi.training.driver import Driver

    config = build_config(game, overrides=overrides)
    run_dir = out / name
    compiled_before, started = clock.seconds, time.perf_counter()
    driver = Driver(config, run_dir, progress=False)
    try:
        summary = driver.run()
    finally:
        driver.close()
    seconds = time.perf_counter() - started
    windows = [row for row in read_metrics(run_dir) if row.get("role") != "test" and "env_steps_per_s" in row][1:]
    steady = {key: round(statistics.median(row[key] for row in windows), 2) if windows else None
              for key in ("env_steps_per_s", "updates_per_s")}
    result = {
        "game": config.game, "agent": config.agent, "run_dir": name, "overrides": overrides,
        "device": summary["device"], "stop_reason": summary["stop_reason"],
        "env_steps": summary["env_steps"], "updates": summary["updates"], "seconds": round(seconds, 2),
        "compile_seconds": round(clock.seconds - compiled_before, 2),
        "env_steps_per_s": round(summary["env_steps"] / seconds, 2),
        "updates_per_s": round(summary["updates"] / seconds, 3),
        "steady_env_steps_per_s": steady["env_steps_per_s"], "steady_updates_per_s": steady["updates_per_s"],
        "last_test": summary.get("last_test"), "checkpoint": str(pathlib.Path(summary["checkpoint"]).relative_to(out)),
    }
    print(f"{name:10s} {result['env_steps']:>10,} env steps {result['env_steps_per_s']:>12,.1f}/s  "
          f"{result['updates']:>7,} updates {result['updates_per_s']:>8,.2f}/s  compile {result['compile_seconds']:.1f} s",
          file=sys.stderr)
    return result


def core(batch: int, simulations: int, rounds: int, network_config, clock: CompileClock) -> dict:
    """bench/core.py's acting and train step at batch `batch`, on the default device."""
    import jax
    import jax.numpy as jnp

    from bench import core as core_bench
    from moozi.core.network import make_network

    network = make_network(network_config, obs_shape=core_bench.OBS_SHAPE, history_length=core_bench.HISTORY,
                           num_actions=core_bench.NUM_ACTIONS)
    variables = jax.jit(network.init)(jax.random.PRNGKey(0), jnp.zeros((1, *network.input_shape)))
    acting, bare, compile_s = core_bench.bench_acting(network, variables, batch, simulations, rounds, calls=1)
    compiled_before = clock.seconds
    train_steps, train_compile_s = core_bench.bench_train(network, batch, rounds, calls=1)
    result = {
        "batch": batch, "num_simulations": simulations, "unroll_steps": core_bench.UNROLL,
        "obs_shape": list(core_bench.OBS_SHAPE), "network": {"channels": network_config.channels,
                                                             "blocks": network_config.representation_blocks},
        "acting_searches_per_s": round(acting, 2), "bare_mctx_searches_per_s": round(bare, 2),
        "acting_first_call_seconds": round(compile_s["acting"], 2),
        "train_steps_per_s": round(train_steps, 3), "train_samples_per_s": round(train_steps * batch, 1),
        "train_first_call_seconds": round(train_compile_s, 2),
        "train_compile_seconds": round(clock.seconds - compiled_before, 2),
    }
    print(f"core       acting {acting:,.1f} searches/s, train {train_steps:,.2f} steps/s at B={batch}", file=sys.stderr)
    return result


# Each size: (on a GPU, with --tiny).
SIZES = {
    "minutes": (2.5, 1.0), "ppo_env_steps": (5_000_000, 256), "ppo_minutes": (1.5, 0.5), "envs": (256, 4),
    "batch": (1024, 8), "core_batch": (1024, 8), "simulations": (50, 4),
}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the run directories (and gpu.json)")
    parser.add_argument("--json", default=None, help="where to write the result (default OUT/gpu.json)")
    parser.add_argument("--wheels", default=None, help="install every wheel of this folder first, without an index")
    parser.add_argument("--tiny", action="store_true", help="seconds per part: checks the script on a CPU")
    parser.add_argument("--only", default=",".join(RUNS), help=f"comma-separated parts (default {','.join(RUNS)})")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="network.dtype of every part")
    parser.add_argument("--minutes", type=float, help="alphazero, muzero: minutes each (2.5; tiny: at most 1)")
    parser.add_argument("--board-env-steps", type=int, default=192, help="alphazero, muzero with --tiny: env steps each")
    parser.add_argument("--ppo-env-steps", type=int, help="ppo: env steps (5,000,000; tiny 256)")
    parser.add_argument("--ppo-minutes", type=float, help="ppo: at most these minutes (1.5; tiny 0.5)")
    parser.add_argument("--envs", type=int, help="alphazero, muzero: env.num_envs (256; tiny 4)")
    parser.add_argument("--batch", type=int, help="alphazero, muzero: train.batch_size (1024; tiny 8)")
    parser.add_argument("--core-batch", type=int, help="core: acting and training batch (1024; tiny 8)")
    parser.add_argument("--simulations", type=int, help="core: search simulations (50; tiny 4)")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(RUNS))
    if unknown:
        parser.error(f"--only: unknown parts {', '.join(unknown)}; choose from {', '.join(RUNS)}")
    for name, (full, tiny) in SIZES.items():  # a size not given on the command line: the GPU's or the tiny one
        if getattr(args, name) is None:
            setattr(args, name, tiny if args.tiny else full)
    if args.wheels:
        install_wheels(args.wheels)  # before jax is imported: the installed jax is the one this process uses
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with CompileClock() as clock:
        result = measure(args, parts, out, clock)
    path = pathlib.Path(args.json) if args.json else out / "gpu.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return result


def measure(args, parts: list[str], out: pathlib.Path, clock: CompileClock) -> dict:
    import jax

    from bench.provenance import provenance
    from bench.selfplay import matmul_flops_per_s
    from moozi.core.network import NetworkConfig

    started = time.perf_counter()
    device = jax.devices()[0]
    print(f"device: {device} ({device.device_kind}), jax {jax.__version__}", file=sys.stderr)
    result = {
        "benchmark": "gpu", **provenance(), "tiny": args.tiny, "dtype": args.dtype,
        "device": {"kind": device.device_kind, "platform": device.platform, "count": jax.device_count(),
                   "jax_version": jax.__version__},
        "matmul_gflops": round(matmul_flops_per_s(512 if args.tiny else 4096, 5) / 1e9, 1),
        "runs": {},
    }
    dtype = {"network.dtype": args.dtype}
    if "ppo" in parts:
        ppo = {"agent": "ppo", "train.max_env_steps": args.ppo_env_steps, "train.max_minutes": args.ppo_minutes,
               # A test of 20 episodes every 200 iterations (PPO makes 32 updates per iteration).
               "train.test_every_updates": 6400, **dtype, **(TINY_PPO if args.tiny else {})}
        result["runs"]["ppo_breakout"] = train("ppo-breakout", "gymnax:Breakout-MinAtar", ppo, out, clock)
    board = {"train.max_minutes": args.minutes, "env.num_envs": args.envs, "train.batch_size": args.batch,
             "train.test_every_updates": 1000, **dtype}
    if args.tiny:  # a few iterations however long compiling takes (a minute's limit could end before one update)
        board.update(TINY_BOARD, **{"train.max_env_steps": args.board_env_steps})
    if "alphazero" in parts:
        result["runs"]["alphazero_connect_four"] = train(
            "alphazero-connect_four", "connect_four", {"agent": "alphazero", **board}, out, clock)
    if "muzero" in parts:
        result["runs"]["muzero_connect_four"] = train(
            "muzero-connect_four", "connect_four", {"game": "pgx:connect_four", **board}, out, clock)
    if "core" in parts:
        network = NetworkConfig(dtype=args.dtype)  # bench/core.py's: the thesis's residual network
        if args.tiny:
            network = NetworkConfig(channels=8, representation_blocks=1, prediction_blocks=1, dynamics_blocks=1,
                                    head_hidden=16, dtype=args.dtype)
        result["core"] = core(args.core_batch, args.simulations, 1 if args.tiny else 3, network, clock)
    result["compile_seconds"] = round(clock.seconds, 2)
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


if __name__ == "__main__":
    main()
