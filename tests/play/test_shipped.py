"""Agents shipped with the package: exported from a run, loaded by a game's name, played like a run."""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import numpy as np
import pytest
from tests.helpers.tiny_connect_four import fresh_run

from moozi.cli import main
from moozi.errors import MooziError
from moozi.play import load_agent, shipped
from moozi.play.agent_export import export_agent
from moozi.runs.checkpoint import CheckpointError

DESCRIPTION = {"game": "tic_tac_toe", "agent": "muzero", "trained_by": "moozi train tic_tac_toe --seed 0",
               "strength": ["0 losses in 100 games against minimax"], "simulations": 4}


@pytest.fixture
def shipped_dir(tmp_path, monkeypatch):
    """An empty package directory of shipped agents, in place of moozi/agents/."""
    directory = tmp_path / "agents"
    directory.mkdir()
    monkeypatch.setattr(shipped, "SHIPPED_DIR", directory)
    return directory


def _exported(tmp_path, shipped_dir):
    run = fresh_run(tmp_path / "run", "tic_tac_toe")
    return run, export_agent(run, shipped_dir / "tic_tac_toe", description=DESCRIPTION)


def test_an_exported_agent_holds_the_playing_variables_only_and_plays_as_the_run_did(tmp_path, shipped_dir):
    run, out = _exported(tmp_path, shipped_dir)
    [checkpoint] = sorted((out / "checkpoints").glob("best-*"))
    meta = json.loads((checkpoint / "meta.json").read_text())
    assert meta["contents"] == shipped.AGENT_VARIABLES and meta["game"] == "openspiel:tic_tac_toe"
    from_run, from_name = load_agent(run), load_agent("tic_tac_toe")
    assert from_name.checkpoint == checkpoint and from_name.config == from_run.config
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(np.array_equal, from_run.variables, from_name.variables))
    # No optimizer state: the file is the variables' size, smaller than the run's checkpoint.
    run_ckpt = sorted((run / "checkpoints").glob("ckpt-*"))[-1]
    assert (checkpoint / "train_state.msgpack").stat().st_size < (run_ckpt / "train_state.msgpack").stat().st_size
    info = shipped.shipped_agents()["tic_tac_toe"]
    assert info["trained_by"] == DESCRIPTION["trained_by"] and info["checkpoint"] == run_ckpt.name
    # The same moves on the same positions, and legal ones.
    a, b = from_run.run_episode(seed=3), from_name.run_episode(seed=3)
    assert a.steps >= 5 and (a.episode_return, a.steps) == (b.episode_return, b.steps)
    np.testing.assert_array_equal(a.last_obs, b.last_obs)


def test_a_run_directory_wins_over_a_shipped_name_and_a_bad_name_says_both(tmp_path, shipped_dir, monkeypatch):
    run, _ = _exported(tmp_path, shipped_dir)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tic_tac_toe").symlink_to(run)
    assert load_agent("tic_tac_toe").checkpoint.name.startswith("ckpt-")  # the run's, not the shipped best-
    with pytest.raises(MooziError, match=r"no_such_game is not a moozi run directory \(no config.json\) and no "
                                         r"shipped agent has that name \(shipped: tic_tac_toe\)"):
        load_agent("no_such_game")


def test_a_damaged_shipped_file_is_refused_like_any_checkpoint(tmp_path, shipped_dir):
    _, out = _exported(tmp_path, shipped_dir)
    [checkpoint] = sorted((out / "checkpoints").glob("best-*"))
    data = (checkpoint / "train_state.msgpack").read_bytes()
    (checkpoint / "train_state.msgpack").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="not a valid msgpack"):
        load_agent("tic_tac_toe")


def test_moozi_agents_lists_it_and_eval_leaves_the_package_alone(tmp_path, shipped_dir, capsys):
    _exported(tmp_path, shipped_dir)
    assert main(["agents"]) == 0
    out = capsys.readouterr().out
    assert "tic_tac_toe: muzero on tic_tac_toe, 4 simulations per move" in out
    assert "trained by: moozi train tic_tac_toe --seed 0" in out and "0 losses in 100 games against minimax" in out
    before = sorted(p.name for p in (shipped_dir / "tic_tac_toe").iterdir())
    assert main(["eval", "tic_tac_toe", "--opponent", "random", "--games", "2", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert json.loads(lines[-1])["games"] == 2
    assert sorted(p.name for p in (shipped_dir / "tic_tac_toe").iterdir()) == before
    assert main(["eval", "tic_tac_toe", "--games", "2", "--json", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["games"] == 2


def test_an_export_without_its_description_is_refused(tmp_path, shipped_dir):
    run = fresh_run(tmp_path / "run", "tic_tac_toe")
    with pytest.raises(MooziError, match="needs trained_by, strength"):
        export_agent(run, shipped_dir / "x", description={"game": "tic_tac_toe", "agent": "muzero"})
    assert not (shipped_dir / "x").exists()


@pytest.mark.slow
def test_the_agents_that_ship_load_play_legal_moves_and_stay_small():
    agents = shipped.shipped_agents()
    size = sum(p.stat().st_size for p in shipped.SHIPPED_DIR.rglob("*") if p.is_file()) if agents else 0
    assert size <= 10 * 2**20, f"shipped agents take {size / 2**20:.1f} MB"
    for name, info in agents.items():
        assert set(shipped.REQUIRED_KEYS) <= set(info)
        agent = load_agent(name)
        assert agent.config.game.endswith(info["game"]) or info["game"] in agent.config.game
        outcome = agent.run_episode(seed=0)  # every move is checked legal by the env
        assert outcome.steps > 0 and not outcome.cut


def test_moozi_agents_runs_as_a_command():
    result = subprocess.run([sys.executable, "-m", "moozi.cli", "agents"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.strip()


def test_every_shipped_file_is_package_data():
    # What `pip install .` or a wheel copies: pyproject's package-data globs for "moozi" (a wheel built
    # from this tree held every file of moozi/agents/tic_tac_toe/).
    import fnmatch
    import pathlib
    import tomllib

    root = pathlib.Path(shipped.__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["moozi"]
    files = [p.relative_to(root / "moozi").as_posix() for p in (root / "moozi" / "agents").rglob("*") if p.is_file()]
    assert files, "no agent ships"
    assert [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)] == []
