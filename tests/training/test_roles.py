"""Every role of the training system, used without Ray (thesis 5.2.12-5.2.17)."""

import numpy as np
import pytest

from tests.helpers.tiny import tiny_config
from moozi.core.types import Trajectory
from moozi.training.roles.parameter_optimizer import NonFiniteError, ParameterOptimizer
from moozi.training.roles.replay_buffer import ReplayRole
from moozi.training.roles.reanalyze_worker import ReanalyzeRolloutWorker
from moozi.training.roles.self_play import TrainingRolloutWorker
from moozi.training.roles.testing_worker import TestingRolloutWorker as Tester

@pytest.fixture(scope="module")
def config():
    return tiny_config()


@pytest.fixture(scope="module")
def learner(config):
    return ParameterOptimizer(config)


def _check_trajectory(t: Trajectory, num_actions: int):
    length = len(t.action)
    assert t.obs.shape == (length, 3, 3, 4)  # 3 library planes + the to-play plane
    assert t.is_first[0] and not t.is_first[1:].any()
    assert t.is_last[-1] and not t.is_last[:-1].any()
    assert t.action[-1] == 0 and (t.action[:-1] >= 1).all()  # the dummy only at the end
    assert t.legal_actions[np.arange(length), t.action].all()  # every action was legal
    np.testing.assert_allclose(t.action_probs.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(t.action_probs[-1], np.eye(num_actions)[0])  # terminal: one-hot dummy
    assert t.reward[0] == 0 and abs(t.reward[-1]) in (0.0, 1.0)
    assert (t.to_play[:-1] == np.arange(length - 1) % 2).all()  # tic-tac-toe alternates from player 0


def test_training_worker_yields_exact_episodes(config, learner):
    worker = TrainingRolloutWorker(config, 0)
    params = learner.get_params()
    result = worker.run(params, 12, policy_version=0)
    assert result.env_steps == 12 * 4 and result.policy_version == 0
    assert result.trajectories, "4 envs x 12 steps must finish some tic-tac-toe games"
    for trajectory in result.trajectories:
        _check_trajectory(trajectory, worker.spec.num_actions)
    assert result.metrics["env_steps"] == 48
    assert 5 <= result.metrics["episode_length"] <= 10
    worker.close()


def test_training_worker_state_dict_resumes_the_same_stream(config, learner):
    params = learner.get_params()
    a = TrainingRolloutWorker(config, 0)
    a.run(params, 5, 0)
    b = TrainingRolloutWorker(config, 0)
    b.load_state_dict(a.state_dict())
    ra, rb = a.run(params, 9, 1), b.run(params, 9, 1)
    assert len(ra.trajectories) == len(rb.trajectories) > 0
    for x, y in zip(ra.trajectories, rb.trajectories):
        for field in Trajectory._fields:
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field))
    a.close()
    b.close()


def test_workers_with_other_indices_play_other_games(config, learner):
    params = learner.get_params()
    w0, w1 = TrainingRolloutWorker(config, 0), TrainingRolloutWorker(config, 1)
    r0, r1 = w0.run(params, 10, 0), w1.run(params, 10, 0)
    actions0 = np.concatenate([t.action for t in r0.trajectories])
    actions1 = np.concatenate([t.action for t in r1.trajectories])
    assert actions0.shape != actions1.shape or not np.array_equal(actions0, actions1)


@pytest.mark.slow
def test_replay_and_learner_roles(config, learner):
    worker = TrainingRolloutWorker(config, 0)
    replay = ReplayRole(config)
    params = learner.get_params()
    while not replay.ready():
        replay.add_rollouts([worker.run(params, 6, 0)])
    batches = replay.sample_batches(2, config.train.batch_size)
    assert len(batches) == 2 and batches[0][0].stacked_obs.shape[0] == config.train.batch_size
    version = learner.version
    result = learner.update(batches)
    assert result.version == version + 2
    assert {"policy_loss", "value_loss", "reward_loss", "consistency_loss", "l2_loss", "total_loss"} <= set(result.metrics)
    replay.update_priorities(result)
    stats = replay.stats()
    assert stats["replay_size"] >= config.replay.min_fill
    worker.close()


@pytest.mark.slow
def test_learner_stops_on_non_finite_loss(config):
    learner = ParameterOptimizer(config)
    worker = TrainingRolloutWorker(config, 0)
    replay = ReplayRole(config)
    while not replay.ready():
        replay.add_rollouts([worker.run(learner.get_params(), 6, 0)])
    batch, indices = replay.sample_batches(1, 8)[0]
    poisoned = batch._replace(rewards=np.full_like(batch.rewards, np.nan))
    with pytest.raises(NonFiniteError, match=r"non-finite .*reward_loss.* at update 1"):
        learner.update([(poisoned, indices)])
    worker.close()


def test_testing_worker_reports_rates_summing_to_one(config, learner):
    tester = Tester(config)
    metrics = tester.run(learner.get_params(), episodes=6, seed=3)
    total = metrics["test_win_rate"] + metrics["test_draw_rate"] + metrics["test_loss_rate"]
    assert total == pytest.approx(1.0)
    assert metrics == tester.run(learner.get_params(), episodes=6, seed=3)  # deterministic given the seed


@pytest.mark.slow
def test_a_test_stops_after_test_max_steps_and_counts_the_cut_episodes():
    # CartPole cannot fail in 3 steps (the pole needs ~8 to pass 12 degrees), so every episode is cut:
    # the return so far is the rewards of steps 1 and 2 (the reset step has none).
    from moozi.config import build_config

    config = build_config("cartpole", overrides={"network.mlp_hidden_sizes": "8", "network.mlp_hidden_state_size": "8",
                                                  "network.head_hidden": "8", "planner.num_simulations": "2",
                                                  "train.test_max_steps": "3"})
    metrics = Tester(config).run(ParameterOptimizer(config).get_params(), episodes=4, seed=0)
    assert metrics["test_cut_episodes"] == 4
    assert metrics["test_return"] == 2.0 and metrics["test_return_std"] == 0.0


@pytest.mark.slow
def test_reanalyze_worker_replaces_only_search_statistics(config, learner):
    worker = TrainingRolloutWorker(config, 0)
    replay = ReplayRole(config)
    while replay.buffer.num_trajectories < 5:
        replay.add_rollouts([worker.run(learner.get_params(), 6, 0)])
    stored = replay.sample_trajectories(5)
    reanalyzer = ReanalyzeRolloutWorker(config)
    out = reanalyzer.run(learner.get_params(), stored)
    assert sorted(i for i, _, _ in out) == sorted(i for i, _ in stored)
    by_id = dict(stored)
    for trajectory_id, root_value, action_probs in out:
        original = by_id[trajectory_id]
        assert root_value.shape == original.root_value.shape
        assert action_probs.shape == original.action_probs.shape
        np.testing.assert_allclose(action_probs.sum(-1), 1.0, rtol=1e-5)
        # The search never puts mass on illegal actions, so p* stays inside the stored legal sets.
        assert (action_probs[~original.legal_actions] == 0).all()
    steps = replay.replace_search_statistics(out)
    assert steps == sum(len(by_id[i].action) for i, _, _ in out)
    worker.close()


@pytest.mark.slow
def test_a_cancelled_test_ends_at_its_next_step(tmp_path):
    # Freeway's episodes last 2,500 steps: a test cancelled from another thread (a run closing while
    # its test plays beside the loop) ends within a few steps instead of playing them all.
    import threading

    from tests.helpers.tiny_connect_four import fresh_variables, tiny_config as game_config

    config = game_config("freeway", **{"train.test_max_steps": 2_500})
    _, variables = fresh_variables(config)
    tester = Tester(config)
    steps = []
    act = tester._act

    def counting_act(*args):
        steps.append(1)
        if len(steps) == 5:
            threading.Thread(target=tester.cancel).start()
        return act(*args)

    tester._act = counting_act
    tester.run(variables, 2, 0)
    assert 5 <= len(steps) < 50
