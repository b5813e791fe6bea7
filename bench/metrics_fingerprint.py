"""A run's seed-determined metrics, to show that a change left training exactly as it was.

    python bench/metrics_fingerprint.py GAME MAX_ENV_STEPS OUT.jsonl [--compare OTHER.jsonl] [--set key=value ...]

Trains GAME with its preset through the `moozi train` command line (inline
backend, seed 0, a test every 100 updates of 10 games), stopped after
MAX_ENV_STEPS env steps so the run's length does not depend on the clock.
Then writes every metrics.jsonl row with its keys sorted and its wall-clock
values dropped (`time`, `*_seconds`, `*_per_s`): what is left depends only on
the seed, the config and the code. Run it before and after a change, pinned
to the same cores (`taskset -c 0`: XLA's CPU programs may split a reduction
differently with another number of threads), and compare the two files byte
for byte. Tic-tac-toe: 7168 steps give 200 updates; Connect Four: 15360.
Prints ONE JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_TIMING_SUFFIXES = ("_seconds", "_per_s")


def fingerprint_rows(metrics_path: pathlib.Path) -> list[str]:
    rows = []
    for line in metrics_path.read_text().splitlines():
        row = json.loads(line)
        kept = {k: row[k] for k in sorted(row) if k != "time" and not k.endswith(_TIMING_SUFFIXES)}
        rows.append(json.dumps(kept))
    return rows


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("game")
    parser.add_argument("max_env_steps", type=int)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--compare", type=pathlib.Path, help="a fingerprint written before the change")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override, e.g. agent=ppo (repeatable)")
    args = parser.parse_args(argv)

    from moozi.cli import main as moozi_main

    run_dir = pathlib.Path(tempfile.mkdtemp(prefix="moozi-fingerprint-")) / "run"
    try:
        code = moozi_main(["train", args.game, "--run-dir", str(run_dir), "--max-env-steps", str(args.max_env_steps),
                           "--seed", "0", "--quiet", "--set", "train.test_every_updates=100",
                           "--set", "train.test_episodes=10",
                           *(a for item in args.overrides for a in ("--set", item))])
    except SystemExit as exit_:
        code = exit_.code
    if code not in (0, None):
        raise SystemExit(f"moozi train exited with {code}")
    rows = fingerprint_rows(run_dir / "metrics.jsonl")
    args.out.write_text("\n".join(rows) + "\n")
    last = json.loads(rows[-1]) if rows else {}
    report = {"benchmark": "metrics_fingerprint", "game": args.game, "rows": len(rows), "last_step": last.get("step"),
              "out": str(args.out)}
    if args.compare is not None:
        report["identical"] = args.compare.read_bytes() == args.out.read_bytes()
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
