"""The learning regression: tic-tac-toe trained for a few minutes beats a random player.

Bounded by wall-clock time (like muzero-general's CI cartpole check), so a
slower machine trains less; the threshold leaves room for that.
"""

import pytest

from moozi.agent import load_agent
from moozi.config import build_config
from moozi.evaluation import evaluate
from moozi.system.driver import Driver

TRAIN_MINUTES = 3.0


@pytest.mark.slow
def test_tic_tac_toe_beats_random_after_a_few_minutes(tmp_path):
    config = build_config("tic_tac_toe", overrides={"train.max_minutes": TRAIN_MINUTES, "seed": 0})
    driver = Driver(config, tmp_path / "run", progress=False)
    try:
        summary = driver.run()
    finally:
        driver.close()
    assert summary["updates"] > 0
    result = evaluate(load_agent(tmp_path / "run"), "tic_tac_toe", "random", num_games=100, seed=123)
    assert result.wins >= 90, result.format_table()
