"""Inline and Ray give the same run (issue 4): the first N updates' metrics, compared exactly.

    python bench/backend_equality.py [--updates 200] [--workers 2]

Synchronous mode makes every batch come from a known policy version and the
environment seeds depend only on the seed and worker index, so the two
backends must log identical losses, episode statistics and test results.
Uses the tiny tic-tac-toe network of the test suite so it finishes in minutes.
Prints a line per backend, then ONE JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)

    import numpy as np

    from moozi.config import build_config
    from tests.helpers.tiny import TINY, deterministic_rows, run_driver

    steps_per_iteration = 4 * 6 * args.workers  # env.num_envs x train.rollout_steps x workers
    updates_per_iteration = int(TINY["train.updates_per_iteration"])
    # The buffer is ready (min_fill 40 steps) from iteration 3 on; every iteration then makes 2 updates.
    iterations = 2 + -(-args.updates // updates_per_iteration)
    work = pathlib.Path(tempfile.mkdtemp(prefix="moozi-backends-"))
    rows, seconds = {}, {}
    for kind in ("inline", "ray"):
        config = build_config("tic_tac_toe", overrides={
            **TINY, "backend.kind": kind, "train.num_training_workers": str(args.workers),
            "train.max_env_steps": str(iterations * steps_per_iteration)})
        start = time.monotonic()
        summary = run_driver(config, work / kind)
        seconds[kind] = time.monotonic() - start
        rows[kind] = deterministic_rows(work / kind)
        print(kind, f"{seconds[kind]:.0f}s", json.dumps({k: v for k, v in summary.items() if not isinstance(v, dict)}),
              file=sys.stderr)
    a, b = rows["inline"], rows["ray"]
    mismatches, max_diff, values = [], 0.0, 0
    for row_a, row_b in zip(a, b):
        if row_a.keys() != row_b.keys():
            mismatches.append({"step": row_a.get("step"), "keys": sorted(set(row_a) ^ set(row_b))})
            continue
        for key, value in row_a.items():
            if isinstance(value, str):
                same = value == row_b[key]
            else:
                diff = float(np.max(np.abs(np.asarray(value, float) - np.asarray(row_b[key], float))))
                max_diff = max(max_diff, diff)
                same = diff == 0.0
                values += 1
            if not same:
                mismatches.append({"step": row_a.get("step"), "key": key, "inline": value, "ray": row_b[key]})
    last_update = max((row.get("step", 0) for row in a if "total_loss" in row), default=0)
    report = {
        "benchmark": "backend_equality", "workers": args.workers, "updates_logged_through": last_update,
        "rows": [len(a), len(b)], "values_compared": values, "identical": not mismatches and len(a) == len(b),
        "max_abs_difference": max_diff, "mismatches": mismatches[:5],
        "seconds": {k: round(v, 1) for k, v in seconds.items()}, "cpu_count": os.cpu_count(),
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
