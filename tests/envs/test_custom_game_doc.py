"""docs/custom_game.py runs as documented, and its game passes the conformance suite."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import pytest

import moozi.envs.testing as conformance
from moozi.envs import make_env, unregister_game

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "custom_game.py"


@pytest.fixture
def doc_module():
    spec = importlib.util.spec_from_file_location("custom_game_doc", DOC)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    unregister_game("nim")


def test_the_example_runs_as_a_script():
    result = subprocess.run([sys.executable, str(DOC)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("heap ") and lines[-1] in ("player 0 wins", "player 1 wins")


def test_the_custom_game_passes_conformance(doc_module):
    conformance.check_host_env(doc_module.Nim, num_steps=200)


def test_registration_makes_the_game_a_name(doc_module):
    lines = doc_module.main()
    env = make_env("nim", seed=1)
    assert isinstance(env, doc_module.Nim) and env.spec.num_players == 2
    # The winner took the last stone and was paid +1 at that step.
    assert lines[-2].endswith("heap 0, reward +1")
