"""An agent's greedy moves on the solver-labelled positions: scoring, the CLI, the testing worker's metrics."""

import json

import jax
import numpy as np
import pytest
from tests.helpers.tiny_connect_four import fresh_run, fresh_variables, tiny_config

from moozi.play import load_agent
from moozi.cli import main
from moozi.errors import MooziError
from moozi.evaluation.intervals import wilson_interval
from moozi.runs.metrics_log import MetricsLogger
from moozi.runs.report import write_report
from moozi.evaluation.position_eval import PositionsEvaluator, evaluate_agent_on_positions, score_moves
from moozi.evaluation.positions import PHASES, LabelledPosition, load_positions
from moozi.core.planner import greedy_planner_config
from moozi.builders import env_spec, make_acting
from moozi.training.roles.testing_worker import TestingRolloutWorker

TEST_METRICS = {
    "test_solver_keeps_result", "test_solver_best_move", "test_value_sign_accuracy",
    "test_solver_keeps_result_ci_low", "test_solver_keeps_result_ci_high",
    *(f"test_solver_keeps_result_{phase}" for phase in PHASES),
}


def _position(moves, scores, keeping, best, value):
    return LabelledPosition(moves=tuple(moves), scores=tuple(scores), best_moves=tuple(best),
                            keeping_moves=tuple(keeping), value=value, source="hand")


def test_moves_and_values_are_scored_against_the_labels():
    # Invented labels (the move lists only set the phase): scoring reads nothing else.
    positions = [
        _position([], [-2, -1, 0, 1, 0, -1, -2], keeping=[3], best=[3], value=1),  # early, won
        _position([3] * 14, [0, 0, -3, None, -1, 2, -2], keeping=[5], best=[5], value=1),  # middle, won
        _position([3] * 15, [0, 2, 0, None, 2, -1, 0], keeping=[1, 4], best=[1, 4], value=1),  # middle, won
        _position([0] * 28, [0, 0, -3, 0, -1, 0, -2], keeping=[0, 1, 3, 5], best=[0, 1], value=0),  # late, drawn
        _position([1] * 30, [-1, -2, -2, -1, -3, -1, -5], keeping=list(range(7)), best=[0, 3, 5], value=-1),  # lost
    ]
    columns = [3, 4, 1, 3, 6]
    values = [0.5, -0.1, 0.2, 0.9, 0.3]
    result = score_moves("openspiel:connect_four", positions, columns, values)
    assert result.positions == {"all": 4, "early": 1, "middle": 2, "late": 1}  # the lost one measures no move
    assert result.keeps_result == {"all": 3 / 4, "early": 1.0, "middle": 0.5, "late": 1.0}
    assert result.best_move == {"all": 2 / 4, "early": 1.0, "middle": 0.5, "late": 0.0}
    assert result.random_keeps_result["all"] == pytest.approx((1 / 7 + 1 / 6 + 2 / 6 + 4 / 7) / 4)
    assert (result.won_positions, result.lost_positions) == (3, 1)
    assert result.value_sign_accuracy_won == pytest.approx(2 / 3)
    assert result.value_sign_accuracy_lost == 0.0
    assert result.value_sign_accuracy == pytest.approx(1 / 3)  # an always-positive value scores 0.5 at best
    assert result.test_metrics() == {
        "test_solver_keeps_result": 0.75, "test_solver_best_move": 0.5, "test_solver_keeps_result_early": 1.0,
        "test_solver_keeps_result_middle": 0.5, "test_solver_keeps_result_late": 1.0,
        "test_value_sign_accuracy": pytest.approx(1 / 3),
        # the 95% Wilson interval of 3 of 4 (tests/evaluation/test_matches.py pins its numbers)
        "test_solver_keeps_result_ci_low": pytest.approx(wilson_interval(3, 4)[0]),
        "test_solver_keeps_result_ci_high": pytest.approx(wilson_interval(3, 4)[1]),
    }
    assert "value sign accuracy" in result.format_table()


@pytest.fixture(scope="module")
def mz_result(tmp_path_factory):
    run_dir = fresh_run(tmp_path_factory.mktemp("c4") / "run")
    return evaluate_agent_on_positions(load_agent(run_dir))


@pytest.mark.slow
def test_fresh_agent_on_every_position_gives_shares_in_the_unit_interval(mz_result):
    positions = load_positions().positions
    assert mz_result.positions["all"] == sum(p.informative for p in positions)
    assert mz_result.won_positions + mz_result.lost_positions == sum(p.value != 0 for p in positions)
    assert mz_result.lost_positions > 0
    for shares in (mz_result.keeps_result, mz_result.best_move, mz_result.random_keeps_result):
        assert set(shares) == {"all", *PHASES} and all(0.0 <= v <= 1.0 for v in shares.values())
    assert 0.0 <= mz_result.value_sign_accuracy <= 1.0
    assert set(mz_result.test_metrics()) == TEST_METRICS
    baseline = load_positions().header["random_mover_baseline"]["keeps_result"]
    assert mz_result.random_keeps_result["all"] == pytest.approx(baseline["all"], abs=1e-4)


@pytest.mark.slow
def test_batches_are_padded_and_the_padding_is_dropped():
    config = tiny_config()
    spec = env_spec(config)
    act = make_acting(config, spec, greedy_planner_config(config.planner))
    positions = load_positions().positions[:5]
    _, variables = fresh_variables(config)
    columns, values = PositionsEvaluator(config, spec, act, positions, batch_size=4).search(variables, jax.random.key(0))
    assert columns.shape == values.shape == (5,)
    assert all(c in p.legal_moves for c, p in zip(columns, positions))


def test_other_games_are_refused():
    config = tiny_config("tic_tac_toe")
    with pytest.raises(MooziError, match="connect_four"):
        PositionsEvaluator(config, env_spec(config), None, load_positions().positions)


@pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
def test_testing_worker_adds_the_solver_metrics_for_connect_four_only():
    for game, expected in (("connect_four", TEST_METRICS), ("tic_tac_toe", set())):
        config = tiny_config(game)
        _, variables = fresh_variables(config)
        metrics = TestingRolloutWorker(config).run(variables, 4, 0)
        assert {"test_win_rate", "test_draw_rate", "test_loss_rate"} <= set(metrics)
        assert set(metrics) & TEST_METRICS == expected, game
        assert all(0.0 <= metrics[name] <= 1.0 for name in expected)


def test_report_plots_the_solver_metrics_with_the_evaluation(tmp_path):
    with MetricsLogger(tmp_path) as log:
        for step in (10, 20):
            log.write(step, {name: step / 40 for name in TEST_METRICS}, role="test")
    write_report(tmp_path)
    summary = (tmp_path / "report" / "summary.md").read_text()
    for name in TEST_METRICS:
        assert f"| evaluation | `test/{name}` | 0.5 | 20 | 0.5 | 20 |" in summary
    assert (tmp_path / "report" / "evaluation.png").exists()


def _cli(capsys, *args):
    code = main(["eval", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_cli_positions_prints_the_table_and_writes_json(tmp_path, capsys, mz_result):
    run_dir = fresh_run(tmp_path / "run")
    code, out, err = _cli(capsys, run_dir, "--positions")
    assert code == 0, err
    assert "keeps result" in out and "random" in out and "value sign accuracy" in out
    written = json.loads((run_dir / "eval-positions.json").read_text())
    assert written["kind"] == "positions"
    assert written["keeps_result"] == pytest.approx(mz_result.keeps_result)  # the same parameters


@pytest.mark.slow
def test_cli_prints_and_records_the_simulations_it_searched_with(tmp_path, capsys):
    run_dir = fresh_run(tmp_path / "run", **{"planner.play_simulations": 6})
    code, out, err = _cli(capsys, run_dir, "--positions", "--simulations", 5)
    assert code == 0, err
    assert "5 simulations per move" in out and "greedy search of 5 simulations" in out
    assert json.loads((run_dir / "eval-positions.json").read_text())["simulations"] == 5
    code, out, err = _cli(capsys, run_dir, "--opponent", "random", "--games", 2)
    assert code == 0, err
    assert "6 simulations per move" in out  # the run's planner.play_simulations
    assert json.loads((run_dir / "eval-random.json").read_text())["simulations"] == 6


@pytest.mark.parametrize(
    "game, extra, message",
    [
        ("tic_tac_toe", ["--positions"], "--positions measures connect_four runs"),
        ("connect_four", ["--positions", "--games", "4"], "--games is not a --positions option"),
        ("connect_four", ["--positions", "--games", "0"], "--games is not a --positions option"),
        ("connect_four", ["--positions", "--opponent", "solver"], "--opponent is not a --positions option"),
        ("tic_tac_toe", ["--opponent", "solver"], "the solver opponent plays only connect_four, not tic_tac_toe"),
        ("connect_four", ["--simulations", "0"], "simulations must be a positive integer, got 0"),
        ("connect_four", ["--ladder", "--simulations", "8"], "--simulations is not a ladder option"),
    ],
)
def test_cli_refusals_are_one_line(tmp_path, capsys, game, extra, message):
    run_dir = fresh_run(tmp_path / "run", game=game)
    code, out, err = _cli(capsys, run_dir, *extra)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not list(run_dir.glob("eval-*.json"))


@pytest.mark.slow
def test_alphazero_runs_are_measured_in_their_pgx_twin(tmp_path):
    run_dir = fresh_run(tmp_path / "run", agent="alphazero")
    result = evaluate_agent_on_positions(load_agent(run_dir))
    assert result.game == "pgx:connect_four"
    assert all(0.0 <= v <= 1.0 for v in result.keeps_result.values())
    assert set(result.test_metrics()) == TEST_METRICS
    config = tiny_config(agent="alphazero")
    _, variables = fresh_variables(config)
    assert TEST_METRICS <= set(TestingRolloutWorker(config).run(variables, 4, 0))


@pytest.mark.slow
def test_training_logs_the_solver_metrics(tmp_path):
    from moozi.runs.metrics_log import read_metrics
    from tests.helpers.tiny import run_driver

    config = tiny_config(**{"train.max_env_steps": 24 * 6, "train.test_every_updates": 2, "replay.min_fill": 20})
    run_driver(config, tmp_path / "run")
    tests = [row for row in read_metrics(tmp_path / "run") if row.get("role") == "test"]
    assert tests and all(TEST_METRICS <= set(row) for row in tests)
    assert np.all([0.0 <= row["test_solver_keeps_result"] <= 1.0 for row in tests])
