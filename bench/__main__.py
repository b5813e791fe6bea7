"""One benchmark command (issue 5): runs the benchmarks of bench/ and gathers their numbers.

    python -m bench [--quick] [--only core,selfplay] [--timeout-minutes M]

Runs each benchmark script as its own process (`python bench/<name>.py [--quick]`),
reads the ONE JSON object on its last stdout line, and puts the named metrics
of issue 5 into one results object with the machine it ran on. A benchmark that
fails is recorded with its error and the others still run. Writes
bench/results/<YYYY-MM-DD>-<hostname>.json (`-quick` before `.json` for --quick)
and a markdown table beside it, and prints ONE JSON object on its last line.
--quick (under 10 minutes) runs the benchmarks' quick modes and skips
learning.py, whose time-to-target runs take hours.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import socket
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

# Issue 5's reference numbers for LightZero 0.2.0 on tic-tac-toe at 25 simulations;
# bench/peers/lightzero.sh measures them again on this machine.
LIGHTZERO_MUZERO = {"collect_env_steps_per_s": 122.0, "whole_run_env_steps_per_s": 6.8}
TARGETS = {"acting_vs_bare_mctx": 0.9, "compute_efficiency": 0.3, "selfplay_vs_lightzero_collect": 10.0}


@dataclasses.dataclass(frozen=True)
class Benchmark:
    name: str  # bench/<name>.py
    quick: bool = True  # runs (with --quick) in a quick run
    optional: bool = False  # skipped without error when the script is absent


BENCHMARKS = (
    Benchmark("envs"),
    Benchmark("core"),
    Benchmark("selfplay"),
    Benchmark("anakin", optional=True),
    Benchmark("learning", quick=False),
)


def last_json_line(text: str) -> dict | None:
    """The last stdout line that is a JSON object (the benchmarks' output contract)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def run_benchmark(script: pathlib.Path, quick: bool, timeout_s: float | None) -> dict:
    """Runs one script; its stderr streams through (progress), its stdout is kept and shown at the end.

    Returns {"seconds", "result": its last-line JSON object or None, "error" when it failed}."""
    command = [sys.executable, str(script)] + (["--quick"] if quick else [])
    print(f"== {script.stem}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tail: collections.deque[str] = collections.deque(maxlen=20)
    out_lines: list[str] = []

    def relay():
        for line in process.stderr:
            tail.append(line.rstrip("\n"))
            sys.stderr.write(line)

    readers = [threading.Thread(target=relay, daemon=True),
               threading.Thread(target=lambda: out_lines.extend(process.stdout), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        process.wait(timeout=timeout_s)
        error = None if process.returncode == 0 else f"exit status {process.returncode}"
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        error = f"timed out after {timeout_s:.0f} s"
    for reader in readers:
        reader.join(timeout=10)
    stdout = "".join(out_lines)
    seconds = time.perf_counter() - start
    table = "\n".join(line for line in stdout.splitlines() if not line.startswith("{"))
    if table:
        print(table, file=sys.stderr)
    result = last_json_line(stdout)
    if result is None and error is None:
        error = "no JSON object on the last line of its output"
    entry = {"seconds": round(seconds, 1), "result": result}
    if error:
        last = next((line.strip() for line in reversed(tail) if any(c.isalpha() for c in line)), "")
        entry["error"] = f"{error}: {last}" if last else error
        print(f"== {script.stem} failed: {entry['error']}", file=sys.stderr)
    return entry


def machine_info() -> dict:
    model = None
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import jax

    return {
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "cpu_model": model or platform.processor() or None,
        "python": platform.python_version(),
        "jax_version": jax.__version__,
        "jax_backend": jax.default_backend(),
        "jax_device": jax.devices()[0].device_kind,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
    }


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _get(result: dict | None, *path):
    for key in path:
        if not isinstance(result, dict) or key not in result:
            return None
        result = result[key]
    return result


def metrics(runs: dict[str, dict]) -> dict:
    """Issue 5's named metrics from the benchmarks' JSON objects (None where a benchmark failed)."""
    core = runs.get("core", {}).get("result")
    selfplay = runs.get("selfplay", {}).get("result")
    anakin = runs.get("anakin", {}).get("result")
    learning = runs.get("learning", {}).get("result")
    envs = runs.get("envs", {}).get("result")
    out: dict = {
        "acting_vs_bare_mctx": _get(core, "acting_vs_bare_mctx"),
        "selfplay_env_steps_per_s": {
            game: row["env_steps_per_s"] for game, row in (_get(selfplay, "selfplay") or {}).items()
        } or None,
        "selfplay_whole_run_env_steps_per_s": {
            name: row["whole_run_env_steps_per_s"] for name, row in (_get(selfplay, "whole_run") or {}).items()
        } or None,
        "learner_updates_per_s": {
            game: row["updates_per_s"] for game, row in (_get(selfplay, "learner") or {}).items()
        } or None,
        "compute_efficiency": _get(selfplay, "compute_efficiency", "efficiency"),
        "bytes_per_stored_step": {
            **({"minatar_shaped": _get(core, "bytes_per_stored_step")} if _get(core, "bytes_per_stored_step") else {}),
            **(_get(selfplay, "bytes_per_stored_step") or {}),
        } or None,
        "anakin_vs_host": _get(anakin, "anakin_vs_host"),
        "env_overhead_p1": {
            game: row.get("overhead_p1") for game, row in (_get(envs, "games") or {}).items()
        } or None,
    }
    if learning is not None:
        out["time_to_target"] = {
            "tic_tac_toe_minutes_to_no_losses_vs_minimax": [
                row.get("minutes_to_no_losses_vs_minimax") for row in learning.get("tic_tac_toe", [])],
            "connect_four_win_rate_vs_mcts1000": [row.get("win_rate_vs_mcts1000") for row in learning.get("connect_four", [])],
            "breakout_mean_return": [row.get("marks") for row in learning.get("breakout", [])],
        }
    collect = _get(out, "selfplay_env_steps_per_s", "tic_tac_toe_25_simulations")
    whole = _get(out, "selfplay_whole_run_env_steps_per_s", "tic_tac_toe_25_simulations")
    out["vs_lightzero"] = {
        "reference": {"source": "issue 5: LightZero 0.2.0 MuZero, tic-tac-toe, 25 simulations", **LIGHTZERO_MUZERO},
        "ours_collect_env_steps_per_cpu_s": _get(selfplay, "selfplay", "tic_tac_toe_25_simulations", "env_steps_per_cpu_s"),
        "ours_whole_run_env_steps_per_cpu_s": _get(
            selfplay, "whole_run", "tic_tac_toe_25_simulations", "whole_run_env_steps_per_cpu_s"),
        "collect_ratio": None if collect is None else round(collect / LIGHTZERO_MUZERO["collect_env_steps_per_s"], 2),
        "whole_run_ratio": None if whole is None else round(whole / LIGHTZERO_MUZERO["whole_run_env_steps_per_s"], 2),
    }
    out["targets_met"] = {
        "acting_vs_bare_mctx": _at_least(out["acting_vs_bare_mctx"], TARGETS["acting_vs_bare_mctx"]),
        "compute_efficiency": _at_least(out["compute_efficiency"], TARGETS["compute_efficiency"]),
        "selfplay_vs_lightzero_collect": _at_least(out["vs_lightzero"]["collect_ratio"], TARGETS["selfplay_vs_lightzero_collect"]),
    }
    return out


def _at_least(value, target):
    return None if value is None else bool(value >= target)


def markdown(results: dict) -> str:
    m, machine = results["metrics"], results["machine"]
    lines = [
        f"# Benchmarks {results['date']} on {machine['hostname']}{' (quick)' if results['quick'] else ''}",
        "",
        f"{machine['cpu_count']} CPUs ({machine['cpu_model']}), JAX {machine['jax_version']} on "
        f"{machine['jax_backend']}, commit {(machine['git_commit'] or '?')[:10]}{' (dirty)' if machine['git_dirty'] else ''}; "
        f"load average {results['load_average_before']:.2f} before, {results['load_average_after']:.2f} after.",
        "",
        "| metric | value | target |",
        "|---|---|---|",
    ]

    def row(name, value, target=""):
        if isinstance(value, float):
            value = f"{value:.4g}"
        lines.append(f"| {name} | {'—' if value is None else value} | {target} |")

    row("acting_vs_bare_mctx", m["acting_vs_bare_mctx"], f"≥ {TARGETS['acting_vs_bare_mctx']}")
    for game, value in (m["selfplay_env_steps_per_s"] or {}).items():
        row(f"selfplay_env_steps_per_s {game}", value)
    for name, value in (m["selfplay_whole_run_env_steps_per_s"] or {}).items():
        row(f"whole-run env steps/s {name}", value)
    vs = m["vs_lightzero"]
    row("tic-tac-toe collect ÷ LightZero (122/s)", vs["collect_ratio"], f"≥ {TARGETS['selfplay_vs_lightzero_collect']:g}")
    row("tic-tac-toe whole run ÷ LightZero (6.8/s)", vs["whole_run_ratio"])
    for game, value in (m["learner_updates_per_s"] or {}).items():
        row(f"learner_updates_per_s {game}", value)
    row("compute_efficiency (breakout)", m["compute_efficiency"], f"≥ {TARGETS['compute_efficiency']}")
    for game, value in (m["bytes_per_stored_step"] or {}).items():
        row(f"bytes_per_stored_step {game}", value)
    anakin = m["anakin_vs_host"]
    if isinstance(anakin, dict):
        for pair, value in anakin.items():
            row(f"anakin_vs_host {pair}", value)
    else:
        row("anakin_vs_host", anakin)
    for game, value in (m["env_overhead_p1"] or {}).items():
        row(f"env layer overhead (P=1) {game}", value)
    if "time_to_target" in m:
        for name, value in m["time_to_target"].items():
            row(name, json.dumps(value))
    lines += ["", "| benchmark | seconds | status |", "|---|---|---|"]
    for name, entry in results["benchmarks"].items():
        lines.append(f"| {name} | {entry.get('seconds', '—')} | {entry.get('error') or entry.get('skipped') or 'ok'} |")
    return "\n".join(lines) + "\n"


def _write(path: pathlib.Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the benchmarks' quick modes, no learning.py (< 10 min)")
    parser.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    parser.add_argument("--timeout-minutes", type=float, default=None,
                        help="stop a benchmark that runs longer (default: none; 10 with --quick)")
    parser.add_argument("--results-dir", default=str(RESULTS), help="where the .json and .md go")
    args = parser.parse_args(argv)
    only = {name for name in args.only.split(",") if name}
    timeout_minutes = args.timeout_minutes if args.timeout_minutes is not None else (10.0 if args.quick else None)

    started = datetime.datetime.now()
    load_before = os.getloadavg()[0]
    runs: dict[str, dict] = {}
    for bench in BENCHMARKS:
        if only and bench.name not in only:
            continue
        if bench.optional and not (ROOT / "bench" / f"{bench.name}.py").exists():
            runs[bench.name] = {"skipped": "not present"}
            continue
        if args.quick and not bench.quick:
            runs[bench.name] = {"skipped": "not in --quick"}
            continue
        runs[bench.name] = run_benchmark(
            ROOT / "bench" / f"{bench.name}.py", args.quick, None if timeout_minutes is None else 60 * timeout_minutes)
    results = {
        "date": started.strftime("%Y-%m-%d"),
        "started": started.isoformat(timespec="seconds"),
        "quick": args.quick,
        "machine": machine_info(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg()[0],
        "seconds": round((datetime.datetime.now() - started).total_seconds(), 1),
        "metrics": metrics(runs),
        "benchmarks": runs,
    }
    out_dir = pathlib.Path(args.results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{results['date']}-{results['machine']['hostname']}{'-quick' if args.quick else ''}"
    _write(out_dir / f"{stem}.json", json.dumps(results, indent=2) + "\n")
    _write(out_dir / f"{stem}.md", markdown(results))
    print(f"wrote {out_dir / stem}.json and .md", file=sys.stderr)
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
