"""Resignation threshold calibration hits its false-positive target."""

from __future__ import annotations

import numpy as np
import pytest

from moozi.training.resignation import NEVER, ResignationCalibrator, calibrate_threshold, false_positive_rate


def _synthetic(n, rng):
    # Lowest root value v ~ U(-1, 1); the player avoids defeat with probability (v + 1) / 2.
    # Then FP(tau) = E[(v + 1) / 2 | v < tau] = (tau + 1) / 4, so a 5% target gives tau = -0.8.
    v = rng.uniform(-1, 1, n)
    lost = rng.random(n) >= (v + 1) / 2
    return v, lost


def test_calibration_hits_the_target_rate_on_a_synthetic_distribution():
    rng = np.random.default_rng(0)
    v, lost = _synthetic(20_000, rng)
    tau = calibrate_threshold(v, lost, 0.05)
    assert tau == pytest.approx(-0.8, abs=0.03)
    fresh_v, fresh_lost = _synthetic(400_000, rng)
    assert false_positive_rate(fresh_v, fresh_lost, tau) == pytest.approx(0.05, abs=0.006)
    # A stricter target resigns less eagerly.
    assert calibrate_threshold(v, lost, 0.01) < tau < calibrate_threshold(v, lost, 0.2)


def test_hand_computed_threshold():
    # Sorted by v_min: -0.9 lost, -0.7 lost, -0.5 won, -0.3 lost, 0.2 won.
    v = np.array([-0.3, -0.9, 0.2, -0.5, -0.7])
    lost = np.array([True, True, False, False, True])
    # FP at tau just above -0.7: 0/2; above -0.5: 1/3; above -0.3: 1/4; above 0.2: 2/5.
    assert calibrate_threshold(v, lost, 0.0) == pytest.approx(-0.6)
    assert calibrate_threshold(v, lost, 0.25) == pytest.approx(-0.05)  # midway to the next value
    assert calibrate_threshold(v, lost, 0.4) > 0.2
    assert calibrate_threshold(v[[2, 3]], lost[[2, 3]], 0.0) == NEVER  # the lowest one was won
    assert false_positive_rate(v, lost, -0.1) == pytest.approx(0.25)


def test_calibrator_waits_for_samples_keeps_a_window_and_round_trips():
    rng = np.random.default_rng(1)
    calibrator = ResignationCalibrator(target_rate=0.05, window=5000, min_samples=1000)
    v, lost = _synthetic(999, rng)
    calibrator.add(v, lost)
    assert calibrator.threshold == NEVER
    for _ in range(10):
        calibrator.add(*_synthetic(1000, rng))
    assert len(calibrator.min_values) == 5000
    assert calibrator.threshold == pytest.approx(-0.8, abs=0.05)
    assert calibrator.measured_rate() <= 0.05
    other = ResignationCalibrator()
    other.load_state_dict(calibrator.state_dict())
    assert other.threshold == calibrator.threshold
    np.testing.assert_array_equal(other.min_values, calibrator.min_values)


def _worker(**overrides):
    from moozi.core.train_step import init_train_state
    from moozi.builders import build_network, env_spec, example_stacked_obs, seed_key
    from moozi.training.roles.self_play import TrainingRolloutWorker
    from tests.helpers.tiny import tiny_config

    config = tiny_config(**{"train.resign": True, "train.resign_min_games": 4, **overrides})
    spec = env_spec(config)
    state = init_train_state(build_network(config, spec), config.optimizer, seed_key(0, 0), example_stacked_obs(config, spec))
    return TrainingRolloutWorker(config), {"params": state.params, "batch_stats": state.batch_stats}


def test_resigning_player_loses_at_once_and_full_games_calibrate():
    worker, params = _worker(**{"train.resign_disabled_fraction": 0.5})
    resign = worker._resignation
    resign.calibrator.threshold = 2.0  # above every value: whoever may resign does, at its first turn
    resign.calibrator.min_samples = 10**9  # and the threshold stays there
    result = worker.run(params, 30, policy_version=0)
    short = [t for t in result.trajectories if len(t.action) == 2]
    full = [t for t in result.trajectories if len(t.action) > 2]
    assert short and full and resign.resignations == len(short)
    for t in short:
        # o_0, first move a_0; at o_1 the second player resigns: the mover of a_0 gets +1.
        assert t.is_last.tolist() == [False, True] and t.reward[-1] == 1.0
        assert t.action[-1] == 0 and t.legal_actions[-1].tolist() == [True] + [False] * 9
    # Only the games played to the end calibrate: two player-games each.
    assert len(resign.calibrator.min_values) == 2 * len(full)
    assert resign.calibrator.lost.sum() == sum(1 for t in full if t.reward[-1] != 0)  # one loser per decided game
    metrics = result.metrics
    assert metrics["resignations"] == len(short) and "resign_threshold" in metrics


def test_resignation_state_round_trips_through_the_worker():
    worker, params = _worker()
    worker.run(params, 12, policy_version=0)
    state = worker.state_dict()
    other, _ = _worker()
    other.load_state_dict(state)
    np.testing.assert_array_equal(other._resignation.allowed, worker._resignation.allowed)
    np.testing.assert_array_equal(other._resignation.lowest, worker._resignation.lowest)
    a = worker.run(params, 12, policy_version=1)
    b = other.run(params, 12, policy_version=1)
    assert [t.action.tolist() for t in a.trajectories] == [t.action.tolist() for t in b.trajectories]
    assert worker._resignation.allowed.tolist() == other._resignation.allowed.tolist()


def test_resignation_needs_a_two_player_game():
    from moozi.config import build_config
    from moozi.errors import MooziError
    from moozi.training.roles.self_play import TrainingRolloutWorker

    with pytest.raises(MooziError, match="two-player"):
        TrainingRolloutWorker(build_config("cartpole", overrides={"train.resign": True, "env.num_envs": 2}))
