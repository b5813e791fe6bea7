"""What a result file must say about where its numbers came from, and the check that it does.

Every script that writes bench/results/ records, at the top level of its JSON object:
- `commit` (40 hex digits) and `tree_clean` (whether tracked files matched that commit);
- `command`: the exact command line;
- `machine`: CPU model, cores, and the float32 2048x2048 matmul's GFLOP/s at the start
  (`matmul_gflops_at_start`; evaluations may add their own `matmul_gflops_at_evaluation`);
- for a training result, the resolved config of every run: a top-level `config`, or a `config`
  in each run's row (`config_sha256` beside it, so two files can be compared without reading both).

`bench/results_page.py --check` fails on a file that lacks any of them, except the files written
before the rule (LEGACY_FILES), which the results page marks as such.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import pathlib
import platform
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Written before result files recorded their commit, command and resolved config: kept as they were
# written (not rewritten after the fact); the results page marks their rows.
LEGACY_FILES = frozenset({
    "2026-11-22-vm-anakin.txt",
    "2026-11-22-vm-quick.json",
    "2026-11-25-atari-pong-60min-seed0.json",
    "2026-11-25-impala-breakout-seed0.json",
    "2026-11-25-impala-breakout-seed1.json",
    "2026-11-25-impala-breakout-seed2.json",
    "2026-11-25-ppo-asterix-seed0.json",
    "2026-11-25-ppo-breakout-seed0.json",
    "2026-11-25-ppo-breakout-seed1.json",
    "2026-11-25-ppo-breakout-seed2.json",
    "2026-11-25-ppo-freeway-seed0.json",
    "2026-11-25-ppo-host-breakout-seed0.json",
    "2026-11-25-ppo-host-breakout-seed1.json",
    "2026-11-25-ppo-host-breakout-seed2.json",
    "2026-11-25-ppo-seaquest-seed0.json",
    "2026-11-25-ppo-space_invaders-seed0.json",
    "2026-11-27-2048-random-mover.json",
    "2026-11-27-go9-alphazero-seed0.json",
    "2026-11-27-gpu-script-cpu-tiny.json",
    "2026-11-27-tic_tac_toe-both-cores-seeds0-2.json",
    "2026-11-27-tic_tac_toe-seeds0-2.json",
    "2026-11-28-backgammon-stochastic_muzero-seed0.json",
    "2026-11-28-backgammon-stochastic_muzero-seed1.json",
    "2026-11-28-connect_four-alphazero-cosine-gumbel2-seed0.json",
    "2026-11-28-connect_four-alphazero-cosine-gumbel2-seed1.json",
    "2026-11-28-go9-alphazero-seed1.json",
    "2026-11-28-go9-alphazero-seed2.json",
    "2026-11-29-connect_four-alphazero-cosine-gumbel2-seed2.json",
    "2026-11-29-connect_four-muzero-seed0.json",
    "2026-11-29-connect_four-muzero-seed2.json",
    "2026-11-29-connect_four-muzero-unroll3-seed1.json",
    "2026-11-29-tic_tac_toe-both-cores-seeds0-2.json",
    "2026-12-04-2048-muzero-seed0.json",
    "2026-12-04-2048-stochastic_muzero-seed0.json",
    "2026-12-05-minatar-v24-asterix-seed0.json",
    "2026-12-05-minatar-v24-asterix-seed1.json",
    "2026-12-05-minatar-v24-asterix-seed2.json",
    "2026-12-05-minatar-v24-breakout-seed0.json",
    "2026-12-05-minatar-v24-breakout-seed1.json",
    "2026-12-05-minatar-v24-breakout-seed2.json",
    "2026-12-05-minatar-v24-freeway-seed0.json",
    "2026-12-05-minatar-v24-freeway-seed1.json",
    "2026-12-05-minatar-v24-freeway-seed2.json",
    "2026-12-05-minatar-v24-seaquest-seed0.json",
    "2026-12-05-minatar-v24-seaquest-seed1.json",
    "2026-12-05-minatar-v24-seaquest-seed2.json",
    "2026-12-05-minatar-v24-space_invaders-seed0.json",
    "2026-12-05-minatar-v24-space_invaders-seed1.json",
    "2026-12-05-minatar-v24-space_invaders-seed2.json",
    "2026-12-06-2048-muzero-seed1.json",
    "2026-12-06-2048-stochastic_muzero-seed1.json",
    "2026-12-06-backgammon-muzero-seed1.json",
})


def git_state() -> dict:
    """The commit of this checkout and whether its tracked files are unchanged. Where the tree is a
    copy without git (a lent GPU machine), MOOZI_COMMIT names the commit it was copied from."""
    def run(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        except OSError:
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = run("rev-parse", "HEAD")
    if commit is None:
        return {"commit": os.environ.get("MOOZI_COMMIT", ""), "tree_clean": os.environ.get("MOOZI_TREE_CLEAN") == "1"}
    return {"commit": commit, "tree_clean": run("status", "--porcelain", "--untracked-files=no") == ""}


def cpu_model() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def matmul_gflops() -> float:
    from bench.selfplay import matmul_flops_per_s

    return round(matmul_flops_per_s(2048, 5) / 1e9, 1)


def provenance(**machine_extra) -> dict:
    """The top-level keys every result file starts with; the matmul speed is measured now."""
    return {**git_state(), "command": " ".join([sys.executable, *sys.argv]),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "matmul_gflops_at_start": matmul_gflops(),
                        **machine_extra}}


def config_record(config: dict) -> dict:
    """A run's resolved config and its hash (of the sorted JSON), for a run's row."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return {"config": config, "config_sha256": hashlib.sha256(text.encode()).hexdigest()}


def run_config(run_dir: pathlib.Path) -> dict:
    """`config_record` of the config a `moozi train` run resolved (its config.json)."""
    return config_record(json.loads((pathlib.Path(run_dir) / "config.json").read_text()))


def write_result(path: str | os.PathLike, report: dict, indent: int | None = 1) -> pathlib.Path:
    """Writes a result file atomically (a temporary sibling of its own, then a rename): a crash leaves
    the old file, and two writers never share a temporary file."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(report, indent=indent) + "\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


# --- the check --------------------------------------------------------------------------------------

def _runs(report: dict) -> list[dict]:
    """The rows of a bench/learning.py report's runs (lists of dicts keyed by game)."""
    return [run for key, runs in report.items() if isinstance(runs, list)
            for run in runs if isinstance(run, dict)]


def problems(name: str, report: dict) -> list[str]:
    """What `report` (the file `name`) fails to record; empty when it records everything (or is legacy)."""
    if name in LEGACY_FILES:
        return []
    missing = []
    if not re.fullmatch(r"[0-9a-f]{40}", str(report.get("commit", ""))):
        missing.append("commit (40 hex digits)")
    if not isinstance(report.get("tree_clean"), bool):
        missing.append("tree_clean")
    if not report.get("command"):
        missing.append("command")
    machine = report.get("machine")
    if not isinstance(machine, dict) or not machine.get("cpu") or not any(
            k.startswith("matmul_gflops") for k in machine):
        missing.append("machine (cpu and matmul_gflops_at_start)")
    trains = report.get("benchmark") in ("learning", "go_strength")
    if trains and not isinstance(report.get("config"), dict):
        runs = _runs(report)
        if not runs or not all(isinstance(run.get("config"), dict) for run in runs):
            missing.append("the resolved config (a top-level `config` or one in every run)")
    return [f"bench/results/{name}: does not record {what}" for what in missing]
