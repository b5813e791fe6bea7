"""`moozi report`: PNG learning curves and summary.md from a synthetic metrics log."""

import json
import subprocess
import sys

import pytest

from moozi.errors import MooziError
from moozi.runs.metrics_log import MetricsLogger
from moozi.runs.report import ReportError, write_report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_log(run_dir, steps=10):
    with MetricsLogger(run_dir) as log:
        for step in range(1, steps + 1):
            log.write(
                step,
                {
                    "policy_loss": 2.0 / step,
                    "value_loss": 1.0 / step if step != 4 else float("nan"),
                    "learner_steps_per_s": 50.0 + step,
                    "replay_size": 100 * step,
                    "replay_priority_mean": 0.5,
                    "search_root_value": 0.1 * step,
                },
                role="learner",
            )
            if step % 5 == 0:
                log.write(step, {"test_return": float(step), "win_rate": step / 10}, role="test")


def test_report_writes_valid_pngs_per_group_and_a_summary(tmp_path):
    _write_log(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"game": "tic_tac_toe", "search": {"num_simulations": 25}}))

    paths = write_report(tmp_path)

    names = [p.name for p in paths]
    assert names == ["losses.png", "throughput.png", "evaluation.png", "search.png", "replay.png", "summary.md"]
    for path in paths[:-1]:
        assert path.parent == tmp_path / "report"
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert '"num_simulations": 25' in summary
    # Final values, and the best value where "best" means something.
    assert "| losses | `learner/policy_loss` | 0.2 | 10 | 0.2 | 10 |" in summary
    assert "| evaluation | `test/test_return` | 10 | 10 | 10 | 10 |" in summary
    assert "| evaluation | `test/win_rate` | 1 | 10 | 1 | 10 |" in summary
    assert "| throughput | `learner/learner_steps_per_s` | 60 | 10 | 60 | 10 |" in summary
    assert "| replay | `learner/replay_size` | 1000 | 10 | – | – |" in summary
    assert "| search | `learner/search_root_value` | 1 | 10 | – | – |" in summary
    for png in names[:-1]:
        assert f"]({png})" in summary


def test_missing_groups_and_config_are_fine(tmp_path):
    with MetricsLogger(tmp_path) as log:
        log.write(1, {"loss": float("inf")})
        log.write(2, {"loss": 0.5, "policy_lag": 1})
    paths = write_report(tmp_path)
    assert [p.name for p in paths] == ["losses.png", "other.png", "summary.md"]
    summary = paths[-1].read_text()
    assert "No `config.json`" in summary
    assert "| losses | `loss` | 0.5 | 2 | 0.5 | 2 |" in summary


def test_stale_pngs_are_removed(tmp_path):
    _write_log(tmp_path, steps=5)
    write_report(tmp_path)
    with MetricsLogger(tmp_path, resume_from_step=0) as log:
        log.write(1, {"total_loss": 1.0})
    write_report(tmp_path)
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["losses.png", "summary.md"]


def test_empty_log_is_a_clear_error(tmp_path):
    with pytest.raises(ReportError, match=r"no metrics in .*metrics\.jsonl yet"):
        write_report(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("")
    with pytest.raises(MooziError, match="no metrics"):
        write_report(tmp_path)


def test_missing_run_dir_is_a_clear_error(tmp_path):
    with pytest.raises(ReportError, match="no run directory"):
        write_report(tmp_path / "nope")


def test_no_import_time_side_effects_and_no_pyplot(tmp_path):
    # In a fresh interpreter: importing moozi.runs.report loads no matplotlib, and a report
    # never imports pyplot, so no global backend is chosen behind the caller's back.
    _write_log(tmp_path, steps=2)
    script = (
        "import sys, moozi.runs.report as r\n"
        "assert 'matplotlib' not in sys.modules\n"
        f"r.write_report({str(tmp_path)!r})\n"
        "assert 'matplotlib.pyplot' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
