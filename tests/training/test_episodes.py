"""EpisodeRecorder: a batched step stream cut into exact per-episode trajectories."""

import numpy as np

from moozi.envs.base import EnvSpec, StepOutput, obs_scale
from moozi.training.episodes import EpisodeRecorder

SPEC = EnvSpec(name="test:toy", obs_shape=(1, 1, 1), num_actions=3, num_players=1)


def _step(t, is_first, is_last):
    b = len(is_first)
    return StepOutput(
        obs=np.full((b, 1, 1, 1), t, np.float32) + np.arange(b)[:, None, None, None] * 100,
        is_first=np.asarray(is_first),
        is_last=np.asarray(is_last),
        reward=np.full(b, t, np.float32),
        legal_actions=np.ones((b, 3), bool),
        to_play=np.full(b, -1, np.int32),
    )


def test_episodes_are_cut_per_env_and_ring_grows():
    recorder = EpisodeRecorder(SPEC, num_envs=2, initial_capacity=2)
    # env 0: episodes of length 3 (t=0..2) and 2 (t=3..4); env 1: one episode t=0..4.
    firsts = [[1, 1], [0, 0], [0, 0], [1, 0], [0, 0]]
    lasts = [[0, 0], [0, 0], [1, 0], [0, 0], [1, 1]]
    done = []
    for t in range(5):
        done += recorder.record(_step(t, firsts[t], lasts[t]), np.full(2, t % 3), np.full(2, float(t)), np.full((2, 3), 1 / 3))
    assert [len(d.action) for d in done] == [3, 2, 5]
    np.testing.assert_array_equal(done[0].obs[:, 0, 0, 0], [0, 1, 2])
    np.testing.assert_array_equal(done[1].obs[:, 0, 0, 0], [3, 4])
    np.testing.assert_array_equal(done[2].obs[:, 0, 0, 0], [100, 101, 102, 103, 104])
    np.testing.assert_array_equal(done[2].root_value, [0, 1, 2, 3, 4])
    assert done[2].is_first[0] and done[2].is_last[-1] and not done[2].is_last[:-1].any()


def test_state_dict_round_trip_continues_identically():
    a = EpisodeRecorder(SPEC, num_envs=2, initial_capacity=4)
    for t in range(3):
        a.record(_step(t, [t == 0, t == 0], [0, 0]), np.zeros(2), np.zeros(2), np.zeros((2, 3)))
    b = EpisodeRecorder(SPEC, num_envs=2)
    b.load_state_dict(a.state_dict())
    out_a = a.record(_step(3, [0, 0], [1, 1]), np.zeros(2), np.zeros(2), np.zeros((2, 3)))
    out_b = b.record(_step(3, [0, 0], [1, 1]), np.zeros(2), np.zeros(2), np.zeros((2, 3)))
    for x, y in zip(out_a, out_b):
        for field in x._fields:
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field))


def test_episode_recorder_keeps_8_bit_frames_as_bytes():
    spec = EnvSpec("test:frames", (2, 2, 1), 3, 1, obs_levels=255)
    recorder = EpisodeRecorder(spec, num_envs=1)
    k = np.array([[[[10], [20]], [[30], [255]]]], np.uint8)
    frames = np.multiply(k, obs_scale(255), dtype=np.float32)
    legal = np.array([[False, True, True]])
    first = StepOutput(frames, np.array([True]), np.array([False]), np.zeros(1, np.float32), legal, np.array([-1], np.int32))
    last = first._replace(is_first=np.array([False]), is_last=np.array([True]), legal_actions=np.array([[True, False, False]]))
    recorder.record(first, np.array([1]), np.zeros(1), np.full((1, 3), 1 / 3))
    [trajectory] = recorder.record(last, np.array([0]), np.zeros(1), np.full((1, 3), 1 / 3))
    assert trajectory.obs.dtype == np.uint8
    np.testing.assert_array_equal(trajectory.obs, np.concatenate([k, k]))
