"""The learning regression: tic-tac-toe trained for a few minutes beats a random player.

Bounded by wall-clock time (like muzero-general's CI cartpole check), so a
slower machine trains less. "Beats" means it does not lose: even exact
minimax play wins only ~87% of games against a random player (the rest are
draws; measured with `moozi.evaluation`), so the bar is at most 10 losses in
100 games, both seats, with wins far ahead of losses.
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
    assert result.losses <= 10, result.format_table()
    assert result.wins >= 70, result.format_table()
