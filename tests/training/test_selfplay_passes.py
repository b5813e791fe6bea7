"""Go self-play without early passes (`train.no_pass_before_move`), on OpenSpiel's real go."""

import numpy as np
import pytest

from moozi.envs.openspiel import OpenSpielEnv
from moozi.errors import MooziError
from moozi.training.selfplay_passes import SelfPlayPassRule

GO5 = "openspiel:go(board_size=5,komi=0.5)"
PASS = 26  # 25 points + 1 for moozi's dummy action at 0


def _step(spec, is_first, is_last, legal=None):
    b = len(is_first)
    if legal is None:
        legal = np.ones((b, spec.num_actions), bool)
        legal[:, 0] = False
    return OpenSpielEnv(GO5[len("openspiel:"):]).reset()._replace(
        obs=np.zeros((b, *spec.obs_shape), np.float32), is_first=np.asarray(is_first), is_last=np.asarray(is_last),
        reward=np.zeros(b, np.float32), legal_actions=legal, to_play=np.zeros(b, np.int32))


def test_the_pass_is_masked_before_move_n_unless_the_opponent_just_passed():
    spec = OpenSpielEnv(GO5[len("openspiel:"):]).spec
    assert spec.num_actions - 1 == PASS
    rule = SelfPlayPassRule(spec, num_envs=3, min_moves=2)
    # Move 0 of three new games: no pass anywhere.
    step = rule.restrict(_step(spec, [True, True, True], [False] * 3), last_action=np.array([0, 0, 0]))
    assert step.legal_actions[:, PASS].tolist() == [False, False, False]
    assert step.legal_actions[:, 1:PASS].all()  # the stones stay
    # Move 1: game 1's opponent passed (allowed for it at move 0? no: a pass it had as its only move).
    step = rule.restrict(_step(spec, [False] * 3, [False] * 3), last_action=np.array([5, PASS, 7]))
    assert step.legal_actions[:, PASS].tolist() == [False, True, False]
    # Move 2: the rule no longer applies; game 2 is over (only the dummy is legal, untouched).
    over = np.zeros((3, spec.num_actions), bool)
    over[:, 1:] = True
    over[2] = False
    over[2, 0] = True
    step = rule.restrict(_step(spec, [False] * 3, [False, False, True], legal=over), last_action=np.array([3, 4, 6]))
    assert step.legal_actions[:, PASS].tolist() == [True, True, False] and step.legal_actions[2, 0]
    # A new game in env 0 starts counting again; a pass that is the only legal move stays.
    only_pass = np.zeros((3, spec.num_actions), bool)
    only_pass[:, PASS] = True
    step = rule.restrict(_step(spec, [True, False, True], [False] * 3, legal=only_pass), last_action=np.array([0, 0, 0]))
    assert step.legal_actions[:, PASS].all() and rule.moves.tolist() == [1, 4, 1]


def _worker(min_moves):
    from moozi.builders import build_network, env_spec, example_stacked_obs, seed_key
    from moozi.core.train_step import init_train_state
    from moozi.training.roles.self_play import TrainingRolloutWorker
    from tests.helpers.tiny import tiny_config

    # Every move uniformly random among the legal ones (epsilon 1): a pass is 1 move in 26.
    config = tiny_config(**{"game": GO5, "train.no_pass_before_move": min_moves, "train.epsilon_start": 1.0,
                            "train.epsilon_end": 1.0, "env.num_envs": 8})
    spec = env_spec(config)
    state = init_train_state(build_network(config, spec), config.optimizer, seed_key(0, 0), example_stacked_obs(config, spec))
    return TrainingRolloutWorker(config), {"params": state.params, "batch_stats": state.batch_stats}


def _early_passes(trajectories, min_moves):
    """Passes before move `min_moves` that did not answer the opponent's pass."""
    count = 0
    for t in trajectories:
        actions = t.action.tolist()
        for i, action in enumerate(actions[:min_moves]):
            if action == PASS and not (i > 0 and actions[i - 1] == PASS):
                count += 1
    return count


@pytest.mark.slow
def test_self_play_games_keep_going_and_the_state_round_trips():
    free, params = _worker(0)
    assert _early_passes(free.run(params, 60, policy_version=0).trajectories, 20) > 0  # the check can fail
    worker, params = _worker(20)
    result = worker.run(params, 60, policy_version=0)
    assert result.trajectories and _early_passes(result.trajectories, 20) == 0
    for t in result.trajectories:
        assert not t.legal_actions[:19, PASS].any() or (t.action[:19] == PASS).any()  # masked as stored
    other, _ = _worker(20)
    other.load_state_dict(worker.state_dict())
    np.testing.assert_array_equal(other._pass_rule.moves, worker._pass_rule.moves)
    a, b = worker.run(params, 10, policy_version=1), other.run(params, 10, policy_version=1)
    assert [t.action.tolist() for t in a.trajectories] == [t.action.tolist() for t in b.trajectories]


def test_the_rule_is_refused_outside_go_and_outside_muzero():
    from moozi.config import build_config
    from moozi.config.overrides import ConfigError
    from moozi.training.roles.self_play import TrainingRolloutWorker
    from tests.helpers.tiny import tiny_config

    with pytest.raises(MooziError, match="a rule of Go self-play; this run plays openspiel:tic_tac_toe"):
        TrainingRolloutWorker(tiny_config(**{"train.no_pass_before_move": 10}))
    with pytest.raises(ConfigError, match="train.no_pass_before_move is for agent=muzero"):
        build_config("go9", overrides={"train.no_pass_before_move": "60"})
