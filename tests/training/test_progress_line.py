"""The training progress line: one line of at most 80 columns, counts with thousands separators,
the in-training test's opponent named."""

import io

import pytest

from moozi.training import metrics_window
from moozi.training.counters import Counters
from moozi.training.metrics_window import PROGRESS_WIDTH, print_progress, progress_line

LARGE = Counters(updates=1_234_567, env_steps=123_456_789)
TWO_PLAYER = {"total_loss": 1234.5, "episode_return": -0.123, "test_win_rate": 0.95, "env_steps_per_s": 123_456.7}
ONE_PLAYER = {"total_loss": 0.0123, "episode_return": 12_345.6, "test_return": 23_456.7, "env_steps_per_s": 9_876.5}


@pytest.mark.parametrize("metrics", [TWO_PLAYER, ONE_PLAYER, {}])
@pytest.mark.parametrize("remaining", [None, 123_456.0])
def test_the_line_fits_80_columns_with_large_numbers(metrics, remaining):
    line = progress_line(99_999.0, LARGE, metrics, remaining)
    assert len(line) <= PROGRESS_WIDTH <= 80, line
    assert "\n" not in line and "\r" not in line
    assert "env 123,456,789" in line  # the env steps are never dropped
    assert line.startswith("27:46:39")


def test_counts_have_thousands_separators_and_win_names_its_opponent():
    line = progress_line(60.0, Counters(updates=20_000, env_steps=2_000_000), {"total_loss": 1.23, "test_win_rate": 0.5})
    assert line == "0:01:00  upd 20,000  env 2,000,000  loss 1.23  win vs random 50%"


def test_what_fits_stays_and_the_speed_goes_first():
    line = progress_line(5.0, Counters(updates=10, env_steps=320), {"total_loss": 0.5, "episode_return": 3.0,
                                                                     "env_steps_per_s": 1234.0})
    assert line == "0:00:05  upd 10  env 320  loss 0.5  return 3  1,234 env/s"
    large = progress_line(99_999.0, LARGE, TWO_PLAYER, 123_456.0)
    assert large == "27:46:39 ETA 34:17:36  env 123,456,789  loss 1,234  win vs random 95%"


def test_a_terminal_gets_one_redrawn_line(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    err = Terminal()
    monkeypatch.setattr(metrics_window.sys, "stderr", err)
    print_progress(99_999.0, LARGE, TWO_PLAYER, 123_456.0)
    written = err.getvalue()
    assert written.endswith("\r") and "\n" not in written
    assert len(written) == PROGRESS_WIDTH + 1
