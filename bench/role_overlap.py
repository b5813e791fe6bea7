"""How busy each role keeps the machine: updates/min, env steps/min and each role's idle share.

    python bench/role_overlap.py [--games connect_four] [--agents muzero,alphazero] [--minutes 5]
        [--warmup-minutes 1.5] [--checkout DIR] [--xla-flags FLAGS] [--label NAME] [--set key=value ...]

Trains each preset with `moozi train` (inline backend, seed 0, the preset's
in-training tests, checkpoints only at the end) for --minutes, from the code
in --checkout (default: this repository; give a `git worktree` of an older
commit to measure "before"), with XLA_FLAGS=--xla-flags when given (e.g.
`--xla_cpu_multi_thread_eigen=false`: each XLA program on its calling thread,
so the learner's and the rollout worker's threads each hold one core instead
of both spreading over both). Then reads metrics.jsonl from the first row
after --warmup-minutes (compiling, filling the buffer) to the last:

- updates_per_min, env_steps_per_min: counters over the wall-clock between rows;
- learner_busy: the learner's update time over that wall-clock; actor_busy: the
  training worker's acting and env time over it (the rest is each role's
  waiting, at the iteration's barrier or while the loop did something else);
- loop_share: the share of the wall-clock inside iterations; before the
  in-training test played beside the loop, the rest was mostly the test.

Prints a table, then ONE JSON object on its last line; the matmul speed is
measured before the runs and recorded with them.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measure(rows: list[dict], warmup_seconds: float) -> dict:
    """The figures above from one run's training rows (test rows dropped)."""
    rows = [r for r in rows if r.get("role") is None and "iteration_seconds" in r]
    start = next((i for i, r in enumerate(rows) if r["time"] >= warmup_seconds), None)
    if start is None or start + 1 >= len(rows):
        raise SystemExit(f"role_overlap: fewer than two rows after {warmup_seconds:g} s; train longer")
    first, window = rows[start], rows[start + 1:]
    wall = window[-1]["time"] - first["time"]

    def total(key):
        return sum(r.get(key, 0.0) for r in window)

    return {
        "seconds": round(wall, 1),
        "updates": int(window[-1]["step"] - first["step"]),
        "env_steps": int(window[-1]["env_steps"] - first["env_steps"]),
        "updates_per_min": round(60 * (window[-1]["step"] - first["step"]) / wall, 1),
        "env_steps_per_min": round(60 * (window[-1]["env_steps"] - first["env_steps"]) / wall, 1),
        "learner_busy": round(total("learner_seconds") / wall, 3),
        "actor_busy": round((total("act_seconds") + total("env_seconds")) / wall, 3),
        "loop_share": round(total("iteration_seconds") / wall, 3),
    }


def run_one(game: str, agent: str, minutes: float, checkout: pathlib.Path, xla_flags: str | None,
            overrides: list[str], work: pathlib.Path) -> list[dict]:
    run_dir = work / f"{game}-{agent}"
    sets = [a for item in [f"agent={agent}", "train.checkpoint_every_minutes=10000", *overrides] for a in ("--set", item)]
    env = dict(os.environ, PYTHONPATH=str(checkout))
    if xla_flags:
        env["XLA_FLAGS"] = xla_flags
    command = [sys.executable, "-m", "moozi.cli", "train", game, "--seed", "0", "--run-dir", str(run_dir),
               "--max-minutes", str(minutes), "--quiet", *sets]
    done = subprocess.run(command, env=env, cwd=str(checkout), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"role_overlap: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", default="connect_four")
    parser.add_argument("--agents", default="muzero,alphazero")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--warmup-minutes", type=float, default=1.5)
    parser.add_argument("--checkout", default=str(ROOT), help="the repository whose code trains (default: this one)")
    parser.add_argument("--xla-flags", default=None, help="XLA_FLAGS for the training process")
    parser.add_argument("--label", default=None, help="a name for this configuration in the JSON (e.g. before)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--work-dir", default=None)
    args = parser.parse_args(argv)
    from bench.selfplay import matmul_flops_per_s

    work = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="moozi-overlap-"))
    checkout = pathlib.Path(args.checkout).resolve()
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or None
    report = {"benchmark": "role_overlap", "label": args.label, "checkout": str(checkout), "commit": commit,
              "xla_flags": args.xla_flags, "overrides": args.overrides, "minutes": args.minutes,
              "warmup_minutes": args.warmup_minutes, "cpu_count": os.cpu_count(),
              "matmul_gflops": round(matmul_flops_per_s(2048, 5) / 1e9, 1),
              "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": []}
    for game in [g for g in args.games.split(",") if g]:
        for agent in [a for a in args.agents.split(",") if a]:
            rows = run_one(game, agent, args.minutes, checkout, args.xla_flags, args.overrides, work)
            row = {"game": game, "agent": agent, **measure(rows, 60 * args.warmup_minutes)}
            report["runs"].append(row)
            print(f"{game:14s} {agent:10s} updates/min {row['updates_per_min']:8.1f}  env steps/min "
                  f"{row['env_steps_per_min']:9.1f}  learner busy {row['learner_busy']:.2f}  actor busy "
                  f"{row['actor_busy']:.2f}  in iterations {row['loop_share']:.2f}", file=sys.stderr, flush=True)
    report["load_average_1min"] = os.getloadavg()[0]
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
