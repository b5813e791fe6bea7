"""epsilon-greedy exploration with a schedule (docs/board_games.md) in the training rollout worker."""

from __future__ import annotations

import numpy as np
import pytest

from moozi.config import build_config, epsilon_at
from moozi.errors import MooziError
from tests.helpers.tiny import tiny_config


def test_schedule_is_linear_then_flat():
    train = build_config("tic_tac_toe", overrides={
        "train.epsilon_start": 0.5, "train.epsilon_end": 0.1, "train.epsilon_env_steps": 1000}).train
    assert [epsilon_at(train, s) for s in (0, 500, 1000, 5000)] == pytest.approx([0.5, 0.3, 0.1, 0.1])
    with pytest.raises(MooziError, match="train.epsilon_end"):
        build_config("tic_tac_toe", overrides={"train.epsilon_end": 2})


def _first_moves(epsilon):
    from moozi.core.train_step import init_train_state
    from moozi.builders import build_network, env_spec, example_stacked_obs, seed_key
    from moozi.training.roles.self_play import TrainingRolloutWorker

    config = tiny_config(**{"train.epsilon_start": epsilon, "train.epsilon_end": epsilon,
                            "planner.temperature": 0.0, "planner.dirichlet_fraction": 0.0, "planner.gumbel_scale": 0.0})
    spec = env_spec(config)
    state = init_train_state(build_network(config, spec), config.optimizer, seed_key(0, 0), example_stacked_obs(config, spec))
    worker = TrainingRolloutWorker(config)
    result = worker.run({"params": state.params, "batch_stats": state.batch_stats}, 60, policy_version=0)
    for t in result.trajectories:  # every move legal where it was played
        assert all(t.legal_actions[i, a] for i, a in enumerate(t.action))
    return [int(t.action[0]) for t in result.trajectories], result.trajectories


@pytest.mark.slow
def test_epsilon_one_plays_uniformly_random_legal_moves_and_keeps_the_search_policy_target():
    greedy, _ = _first_moves(0.0)
    random_moves, trajectories = _first_moves(1.0)
    # A greedy untrained search opens the same way every game; epsilon = 1 spreads the openings.
    assert len(set(greedy)) == 1
    assert len(set(random_moves)) >= 5
    # The policy target is still the search's distribution, not the move played.
    probs = np.stack([t.action_probs[0] for t in trajectories])
    assert np.allclose(probs, probs[0], atol=1e-6)
