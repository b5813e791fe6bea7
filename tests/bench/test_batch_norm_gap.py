"""bench/batch_norm_gap.py: training batches read from a checkpoint's replay, unrolled as the loss and as
the search would; no gap where the normalisation is the same in both modes, one where it is not."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from tests.helpers.tiny_connect_four import fresh_variables, tiny_config

from moozi.builders import build_network, env_spec
from moozi.config import save_config
from moozi.core.types import Trajectory
from moozi.errors import MooziError
from moozi.runs.checkpoint import save_checkpoint
from moozi.training.roles.replay_buffer import ReplayRole

batch_norm_gap = importlib.import_module("bench.batch_norm_gap")


def _filled_replay(config, episodes: int = 6, length: int = 20) -> ReplayRole:
    """A replay holding random Freeway-shaped episodes (binary frames, a random p*, all moves legal)."""
    spec, gen = env_spec(config), np.random.default_rng(0)
    role = ReplayRole(config)
    for _ in range(episodes):
        probs = gen.dirichlet(np.ones(spec.num_actions), length).astype(np.float32)
        role.buffer.add(Trajectory(
            obs=(gen.random((length, *spec.obs_shape)) < 0.1).astype(np.float32),
            action=gen.integers(1, spec.num_actions, length).astype(np.int32),
            reward=np.zeros(length, np.float32), is_first=np.arange(length) == 0,
            is_last=np.arange(length) == length - 1, legal_actions=np.ones((length, spec.num_actions), bool),
            to_play=np.full(length, -1, np.int32), root_value=gen.random(length).astype(np.float32),
            action_probs=probs))
    return role


def _run(tmp_path, **overrides):
    config = tiny_config("freeway", **overrides)
    run = tmp_path / "run"
    run.mkdir()
    save_config(config, run / "config.json")
    state, _ = fresh_variables(config)
    arrays = {f"replay/{k}": v for k, v in _filled_replay(config).state_dict().items()}
    save_checkpoint(run, 0, train_state=state, arrays=arrays, meta={"game": env_spec(config).name})
    return run, config


@pytest.mark.slow  # ~25 s on a loaded core: the replay's target assembly and both unrolls compile
def test_one_line_per_checkpoint_with_every_depth_of_the_unroll(tmp_path, capsys):
    run, config = _run(tmp_path)
    batch_norm_gap.main([str(run), "--batches", "2"])
    (line,) = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    assert line["checkpoint"] == "ckpt-0000000000"
    depths = line["depths"]
    assert len(depths) == config.targets.num_unroll_steps + 1
    for depth in depths:
        for key in ("same_move", "train_move_is_target", "act_move_is_target"):
            assert 0.0 <= depth[key] <= 1.0
        assert depth["kl_act_from_train"] >= -1e-6
    assert depths[0]["states"] == 2 * config.train.batch_size  # every root has its p*
    # Fresh running moments (mean 0, variance 1) are not a batch's moments: the two modes differ.
    assert depths[0]["kl_act_from_train"] > 1e-4 or depths[0]["value_abs_diff"] > 1e-4


@pytest.mark.slow
def test_where_both_modes_normalise_alike_the_gap_is_zero(tmp_path):
    run, config = _run(tmp_path, **{"network.normalization": "layer"})
    network = build_network(config, env_spec(config))
    _, variables = fresh_variables(config)
    role = _filled_replay(config)
    (batch, _), = role.sample_batches(1, config.train.batch_size)
    for depth in batch_norm_gap.measure(network, variables, batch):
        assert depth["same_move"] == 1.0 and depth["train_move_is_target"] == depth["act_move_is_target"]
        assert depth["kl_act_from_train"] == pytest.approx(0.0, abs=1e-6)
        assert depth["value_abs_diff"] == pytest.approx(0.0, abs=1e-5)
    with pytest.raises(MooziError, match="no gap to read"):
        batch_norm_gap.main([str(run)])
