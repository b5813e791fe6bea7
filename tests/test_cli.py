"""The command line's first-hour surface (issue 79): --version, help texts, `moozi games`, and
where `moozi eval` writes its result (a bare --json, greedy and sampled play kept apart)."""

import json

import pytest
from tests.helpers.tiny_connect_four import fresh_run

from moozi import __version__
from moozi.cli import _build_parser, main


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"moozi {__version__}"


def test_train_limits_and_seed_have_help_that_says_what_a_resume_counts():
    train = _build_parser()._subparsers._group_actions[0].choices["train"]
    helps = {action.dest: " ".join((action.help or "").split()) for action in train._actions}
    assert helps["seed"] and "seed" in helps["seed"]
    assert "this invocation" in helps["max_minutes"] and "continues its schedule where it stopped" in helps["max_minutes"]
    assert "whole run" in helps["max_env_steps"] and "--resume included" in helps["max_env_steps"]


def _gym_section(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  gym ("))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("    "))
    return " ".join(lines[start:end]).replace(",", " ").split()


@pytest.mark.slow
def test_games_lists_only_the_gym_ids_that_play(capsys):
    assert main(["games"]) == 0
    gym = _gym_section(capsys.readouterr().out)
    assert "CartPole-v1" in gym and "Acrobot-v1" in gym
    for refused in ("Ant-v2", "Pendulum-v1", "MountainCarContinuous-v0", "Blackjack-v1"):
        assert refused not in gym, refused


def _eval(capsys, *args):
    code = main(["eval", *map(str, args)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out, captured.err


@pytest.mark.slow
def test_eval_json_without_a_path_writes_the_default_file_and_ends_stdout_with_json(tmp_path, capsys):
    run_dir = fresh_run(tmp_path / "run", game="tic_tac_toe")
    out, err = _eval(capsys, run_dir, "--games", 2, "--json")
    printed = json.loads(out.strip().splitlines()[-1])
    assert printed["games"] == 2
    assert json.loads((run_dir / "eval-random.json").read_text()) == printed
    assert "written" in err and "win rate" not in out.lower().splitlines()[-1]
    # --sample keeps its own file: the greedy result stays.
    out, _ = _eval(capsys, run_dir, "--games", 2, "--sample", "--seed", 1)
    assert (run_dir / "eval-random-sampled.json").exists()
    assert json.loads((run_dir / "eval-random.json").read_text()) == printed
    assert f"written {run_dir / 'eval-random-sampled.json'}" in out


@pytest.mark.slow
def test_one_player_greedy_and_sampled_evals_keep_their_own_files(tmp_path, capsys):
    run_dir = fresh_run(tmp_path / "run", game="openspiel:catch")
    _eval(capsys, run_dir, "--episodes", 2, "--max-steps", 3)
    _eval(capsys, run_dir, "--episodes", 3, "--max-steps", 3, "--sample")
    assert json.loads((run_dir / "eval-greedy.json").read_text())["games"] == 2
    assert json.loads((run_dir / "eval-sampled.json").read_text())["games"] == 3
    assert not (run_dir / "eval-random.json").exists()
