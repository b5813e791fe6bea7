"""bench/value_bias.py: stored root values against the discounted returns their episodes paid, read from a
checkpoint's replay; exact on hand-made episodes."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from tests.helpers.tiny_connect_four import fresh_variables, tiny_config

from moozi.builders import env_spec
from moozi.config import save_config
from moozi.core.types import Trajectory
from moozi.errors import MooziError
from moozi.runs.checkpoint import save_checkpoint
from moozi.training.roles.replay_buffer import ReplayRole

value_bias = importlib.import_module("bench.value_bias")


def _episode(spec, rewards, root_values) -> Trajectory:
    length = len(rewards)
    return Trajectory(
        obs=np.zeros((length, *spec.obs_shape), np.float32), action=np.ones(length, np.int32),
        reward=np.asarray(rewards, np.float32), is_first=np.arange(length) == 0,
        is_last=np.arange(length) == length - 1, legal_actions=np.ones((length, spec.num_actions), bool),
        to_play=np.full(length, -1, np.int32), root_value=np.asarray(root_values, np.float32),
        action_probs=np.full((length, spec.num_actions), 1.0 / spec.num_actions, np.float32))


def _run(tmp_path, game: str, episodes):
    config = tiny_config(game, **{"targets.discount": 0.5})
    run = tmp_path / "run"
    run.mkdir()
    save_config(config, run / "config.json")
    role = ReplayRole(config)
    for rewards, values in episodes:
        role.buffer.add(_episode(env_spec(config), rewards, values))
    state, _ = fresh_variables(config)
    arrays = {f"replay/{k}": v for k, v in role.state_dict().items()}
    save_checkpoint(run, 7, train_state=state, arrays=arrays, meta={"game": env_spec(config).name})
    return run


def test_the_bias_of_two_hand_made_episodes(tmp_path, capsys):
    # Step t stores r_t, the reward for arriving at o_t. Returns at discount 0.5: [1 + 0.5 * 2, 2, 0] = [2, 2, 0]
    # and [4, 0].
    run = _run(tmp_path, "freeway", [([0.0, 1.0, 2.0], [2.0, 1.0, 1.0]), ([0.0, 4.0], [3.0, 4.0])])
    value_bias.main([str(run)])
    (line,) = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    gaps = np.array([2 - 2, 1 - 2, 1 - 0, 3 - 4, 4 - 0])
    assert line["checkpoint"] == "ckpt-0000000007"
    assert (line["episodes"], line["steps"]) == (2, 5)
    assert line["root_value_mean"] == pytest.approx(11 / 5, abs=1e-4)
    assert line["return_mean"] == pytest.approx(8 / 5, abs=1e-4)
    assert line["bias"] == pytest.approx(gaps.mean(), abs=1e-4)
    assert line["abs_gap"] == pytest.approx(np.abs(gaps).mean(), abs=1e-4)


def test_two_player_games_are_refused(tmp_path):
    config = tiny_config("connect_four")
    run = tmp_path / "run"
    run.mkdir()
    save_config(config, run / "config.json")
    with pytest.raises(MooziError, match="two players"):
        value_bias.main([str(run)])
