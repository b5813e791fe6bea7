"""RUN/summary.json and the end-of-train words."""

import json
import math

import numpy as np

from moozi.runs.summary import describe, describe_test, write_summary

ONE_PLAYER = {
    "run_dir": "runs/b", "game": "minatar:breakout", "game_arg": "breakout", "agent": "muzero",
    "two_player": False, "elapsed_seconds": 1800.0, "updates": 27944, "env_steps": 3_580_000,
    "episodes": 9000, "stop_reason": "max_minutes", "checkpoint": "runs/b/checkpoints/ckpt-27944",
    "best_checkpoint": "runs/b/checkpoints/best-26000", "test_episodes": 100, "test_max_steps": 2000,
    "last_test": {"update": 26000, "test_return": 16.734, "test_return_std": 6.1, "test_cut_episodes": 2.0},
}

TWO_PLAYER = {
    "run_dir": "runs/t", "game": "openspiel:tic_tac_toe", "game_arg": "tic_tac_toe", "agent": "muzero",
    "two_player": True, "elapsed_seconds": 42.0, "updates": 300, "env_steps": 2400, "episodes": 260,
    "stop_reason": "signal SIGTERM", "checkpoint": "runs/t/checkpoints/ckpt-300", "best_checkpoint": None,
    "test_episodes": 50,
    "last_test": {"update": 296, "test_win_rate": 0.9, "test_win_rate_ci_low": 0.79, "test_win_rate_ci_high": 0.96,
                  "test_draw_rate": 0.06, "test_loss_rate": 0.04},
}


def test_one_player_summary_names_the_return_its_protocol_and_next_commands():
    words = describe(ONE_PLAYER)
    assert words.startswith("Trained minatar:breakout with muzero for 30.0 min, stopped by the time limit")
    assert "27,944 updates, 3,580,000 env steps" in words
    assert "mean return 16.73 over 100 episodes, each capped at 2000 steps (2 reached the cap) at update 26,000." in words
    assert "Best checkpoint:   runs/b/checkpoints/best-26000" in words
    assert "Latest checkpoint: runs/b/checkpoints/ckpt-27944" in words
    assert "moozi eval runs/b --episodes 100" in words and "moozi train breakout --run-dir runs/b --resume" in words


def test_two_player_summary_names_the_opponent_and_the_interval():
    words = describe(TWO_PLAYER)
    assert "for 42 s, stopped by SIGTERM (the last checkpoint was written)." in words
    assert ("against the uniformly random player over 50 games: won 90% (95% interval 79-96%), "
            "drew 6%, lost 4% at update 296.") in words
    assert "Best checkpoint" not in words
    assert "moozi play runs/t" in words and "--opponent mcts" in words


def test_no_test_yet_says_so():
    assert describe_test({"last_test": None}).startswith("none yet")
    solver = {"last_test": {"test_solver_keeps_result": 0.72, "test_solver_keeps_result_ci_low": 0.68,
                            "test_solver_keeps_result_ci_high": 0.76}}
    assert describe_test(solver) == "keeps the solver's result in 72% of the labelled positions (95% interval 68-76%)."


def test_write_summary_is_plain_json_and_replaces_atomically(tmp_path):
    summary = {**ONE_PLAYER, "loss": np.float32(0.5), "nan_metric": math.nan, "steps": np.int64(3)}
    path = write_summary(tmp_path, summary)
    loaded = json.loads(path.read_text())
    assert loaded["loss"] == 0.5 and loaded["nan_metric"] is None and loaded["steps"] == 3
    assert loaded["last_test"]["test_return"] == 16.734
    write_summary(tmp_path, {**ONE_PLAYER, "updates": 1})
    assert json.loads(path.read_text())["updates"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temporary file left behind


def test_the_next_commands_are_ones_the_cli_accepts():
    """Every suggested command parses as moozi's CLI parses it, and the suggested opponent is one
    that `moozi eval` can build (a bare `mcts` once slipped through: it needs mcts:N)."""
    import pyspiel

    from moozi.cli import _build_parser
    from moozi.evaluation.matches import make_opponent

    parser = _build_parser()
    for summary in (ONE_PLAYER, TWO_PLAYER):
        commands = [line.split("#")[0].split() for line in describe(summary).splitlines() if line.startswith("  moozi ")]
        assert len(commands) == 4
        for command in commands:
            args = parser.parse_args(command[1:])
            if getattr(args, "opponent", None):
                make_opponent(args.opponent, pyspiel.load_game("tic_tac_toe"), 1, seed=0)
