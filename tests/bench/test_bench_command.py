"""`python -m bench` (issue 5): each benchmark's last JSON line is read, a failing one is recorded."""

from __future__ import annotations

import importlib
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]

bench_main = importlib.import_module("bench.__main__")


def _script(tmp_path, name: str, body: str) -> pathlib.Path:
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return path


def test_last_json_line_is_the_result_and_quick_is_passed(tmp_path):
    script = _script(tmp_path, "ok", (
        "import json, sys\n"
        "print('a table line')\n"
        "print(json.dumps({'early': 1}))\n"
        "print(json.dumps({'quick': '--quick' in sys.argv, 'acting_vs_bare_mctx': 0.93}))\n"
    ))
    entry = bench_main.run_benchmark(script, quick=True, timeout_s=60)
    assert entry["result"] == {"quick": True, "acting_vs_bare_mctx": 0.93}
    assert "error" not in entry


def test_a_failing_benchmark_is_recorded_with_its_last_error_line(tmp_path):
    script = _script(tmp_path, "bad", "import sys\nprint('partial table')\nsys.exit('cannot open the env')\n")
    entry = bench_main.run_benchmark(script, quick=False, timeout_s=60)
    assert entry["result"] is None
    assert entry["error"] == "exit status 1: cannot open the env"


def test_a_benchmark_without_a_json_line_is_an_error(tmp_path):
    entry = bench_main.run_benchmark(_script(tmp_path, "silent", "print('no json')\n"), quick=False, timeout_s=60)
    assert entry["error"] == "no JSON object on the last line of its output"


def test_metrics_are_gathered_and_a_missing_benchmark_gives_none():
    runs = {
        "core": {"result": {"acting_vs_bare_mctx": 0.95, "bytes_per_stored_step": 1700.0}},
        "selfplay": {"result": {
            "selfplay": {"tic_tac_toe": {"env_steps_per_s": 900.0},
                         "tic_tac_toe_25_simulations": {"env_steps_per_s": 610.0, "env_steps_per_cpu_s": 400.0}},
            "whole_run": {"tic_tac_toe_25_simulations": {"whole_run_env_steps_per_s": 68.0}},
            "learner": {"breakout": {"updates_per_s": 2.5}},
            "compute_efficiency": {"efficiency": 0.12},
            "bytes_per_stored_step": {"breakout": 900.0},
        }},
        "anakin": {"seconds": 3.0, "result": None, "error": "exit status 1: boom"},
    }
    m = bench_main.metrics(runs)
    assert m["acting_vs_bare_mctx"] == 0.95
    assert m["selfplay_env_steps_per_s"] == {"tic_tac_toe": 900.0, "tic_tac_toe_25_simulations": 610.0}
    assert m["selfplay_whole_run_env_steps_per_s"] == {"tic_tac_toe_25_simulations": 68.0}
    assert m["learner_updates_per_s"] == {"breakout": 2.5}
    assert m["compute_efficiency"] == 0.12
    assert m["bytes_per_stored_step"] == {"minatar_shaped": 1700.0, "breakout": 900.0}
    assert m["anakin_vs_host"] is None and m["env_overhead_p1"] is None and "time_to_target" not in m
    assert m["vs_lightzero"]["collect_ratio"] == 5.0  # 610 / 122
    assert m["vs_lightzero"]["whole_run_ratio"] == 10.0  # 68 / 6.8
    assert m["targets_met"] == {"acting_vs_bare_mctx": True, "compute_efficiency": False,
                                "selfplay_vs_lightzero_collect": False}
    table = bench_main.markdown({
        "date": "2026-01-01", "quick": True, "load_average_before": 1.0, "load_average_after": 2.0,
        "machine": {"hostname": "h", "cpu_count": 2, "cpu_model": "cpu", "jax_version": "0", "jax_backend": "cpu",
                    "git_commit": "abc", "git_dirty": False},
        "metrics": m, "benchmarks": runs,
    })
    assert "| acting_vs_bare_mctx | 0.95 | ≥ 0.9 |" in table
    assert "| anakin | 3.0 | exit status 1: boom |" in table
