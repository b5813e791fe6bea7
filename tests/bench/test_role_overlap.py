"""bench/role_overlap.py's figures, from hand-made metrics rows."""

import pytest

from bench.role_overlap import measure


def _row(time, step, env_steps, **seconds):
    return {"step": step, "time": time, "env_steps": env_steps, "iteration_seconds": 8.0, **seconds}


def test_rates_and_busy_shares_count_the_rows_after_the_warmup():
    rows = [
        _row(50.0, 0, 1_000, learner_seconds=0.0, act_seconds=9.0),  # before the warm-up ends: not counted
        _row(100.0, 80, 5_000, learner_seconds=1.0, act_seconds=1.0),  # the window's first row: its start
        {"step": 80, "time": 105.0, "role": "test", "test_win_rate": 1.0},  # a test row: ignored
        _row(110.0, 160, 6_000, learner_seconds=6.0, act_seconds=3.0, env_seconds=1.0),
        _row(120.0, 240, 7_000, learner_seconds=4.0, act_seconds=2.0, env_seconds=0.0),
    ]
    out = measure(rows, warmup_seconds=60.0)
    assert out == {
        "seconds": 20.0,
        "updates": 160,
        "env_steps": 2_000,
        "updates_per_min": 480.0,  # 160 updates in 20 s
        "env_steps_per_min": 6_000.0,
        "learner_busy": 0.5,  # (6 + 4) / 20
        "actor_busy": 0.3,  # (3 + 1 + 2) / 20
        "loop_share": 0.8,  # two iterations of 8 s in 20 s
    }


def test_too_short_a_run_is_refused():
    with pytest.raises(SystemExit, match="fewer than two rows"):
        measure([_row(100.0, 80, 5_000)], warmup_seconds=60.0)
