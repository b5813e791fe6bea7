"""Replay buffer (thesis 5.2.16) and its sum tree."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.core.replay import ReplayBuffer, ReplayConfig, SamplingMode, replay_bytes
from moozi.core.sum_tree import SumTree
from moozi.core.targets import TargetConfig, n_step_returns
from moozi.core.targets import make_targets as _make_targets_eager
from moozi.core.types import Trajectory
from moozi.envs.base import EnvSpec, decode_obs, encode_obs, obs_scale
from moozi.errors import MooziError

# Jitted once per config: eager op-by-op dispatch of the whole assembly is slow.
make_targets = jax.jit(_make_targets_eager, static_argnames=("config", "num_actions", "discount_sign"))

SPEC = EnvSpec("test:grid", (2, 2, 1), 3, 1, binary_obs=True)
TARGETS = TargetConfig(history_length=2, num_unroll_steps=2, td_steps=50, discount=1.0)


def _trajectory(length, first_value=0.0, spec=SPEC, seed=0, reward=0.0):
    """An episode whose v*_t = first_value + t; with zero rewards and N >= T every
    G^N is 0, so delta_t = |v*_t| (easy priorities)."""
    rng = np.random.default_rng(seed)
    A = spec.num_actions
    action = rng.integers(1, A, length).astype(np.int32)
    action[-1] = 0
    probs = rng.random((length, A)).astype(np.float32)
    probs /= probs.sum(-1, keepdims=True)
    return Trajectory(
        obs=(rng.random((length, *spec.obs_shape)) < 0.5).astype(np.float32),
        action=action,
        reward=np.full(length, reward, np.float32),
        is_first=np.arange(length) == 0,
        is_last=np.arange(length) == length - 1,
        legal_actions=np.ones((length, A), bool),
        to_play=np.full(length, -1, np.int32),
        root_value=(first_value + np.arange(length)).astype(np.float32),
        action_probs=probs,
    )


def _buffer(capacity=16, sampling="uniform", alpha=1.0, beta=1.0, epsilon=0.5, min_fill=1, seed=0, **kw):
    config = ReplayConfig(capacity=capacity, min_fill=min_fill, sampling=sampling, priority_exponent=alpha,
                          importance_exponent=beta, priority_epsilon=epsilon)
    return ReplayBuffer(config, TARGETS, SPEC, seed=seed, **kw)


# ---------------------------------------------------------------- sum tree


@pytest.mark.parametrize("capacity", [1, 5, 64, 1000])
def test_sum_tree_prefix_search_matches_brute_force(capacity):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity)
    weights = np.zeros(capacity)
    for _ in range(5):
        # Integer weights keep every prefix sum exact, so the comparison can be exact too.
        idx = rng.integers(0, capacity, size=max(1, capacity // 3))
        val = rng.integers(0, 5, size=idx.size).astype(np.float64)
        tree.update(idx, val)
        for i, v in zip(idx, val):  # reference: sequential writes, the last one wins
            weights[i] = v
        if weights.sum() == 0:
            continue
        assert tree.total == weights.sum()
        assert tree.min_positive == weights[weights > 0].min()
        np.testing.assert_array_equal(tree.leaves, weights)
        cumsum = np.cumsum(weights)
        u = np.concatenate([rng.random(500) * weights.sum(), cumsum[:-1], [0.0]])
        u = u[u < weights.sum()]  # the tree's domain is [0, total)
        expected = np.searchsorted(cumsum, u, side="right")  # first leaf whose prefix end exceeds u
        np.testing.assert_array_equal(tree.find(u), expected)
        assert np.all(weights[tree.find(u)] > 0)
    rebuilt = SumTree(capacity)
    rebuilt.set_all(weights)
    assert rebuilt.total == tree.total and rebuilt.min_positive == tree.min_positive


def test_sum_tree_never_returns_an_empty_leaf_at_the_top_edge():
    tree = SumTree(8)
    tree.update([2, 5], [0.1, 0.2])
    np.testing.assert_array_equal(tree.find([0.0, 0.0999, 0.1, np.nextafter(tree.total, 0), tree.total]),
                                  [2, 2, 5, 5, 5])


# ---------------------------------------------------------------- probabilities and weights


def _five_steps(sampling, alpha, beta, delta):
    buffer = _buffer(capacity=5, sampling=sampling, alpha=alpha, beta=beta)
    buffer.add(_trajectory(5))
    buffer.update_priorities(np.arange(5), delta)
    return buffer


@pytest.mark.parametrize("sampling, alpha, beta, delta, expected_p, expected_w", [
    # epsilon = 0.5: scores = delta + 0.5 = [1, 2, 3, 4, 2].
    ("proportional", 1.0, 1.0, [0.5, 1.5, 2.5, 3.5, 1.5], np.array([1, 2, 3, 4, 2]) / 12, [1, 1 / 2, 1 / 3, 1 / 4, 1 / 2]),
    ("proportional", 2.0, 0.5, [0.5, 1.5, 2.5, 3.5, 1.5], np.array([1, 4, 9, 16, 4]) / 34, [1, 1 / 2, 1 / 3, 1 / 4, 1 / 2]),
    # scores [1, 5, 3, 4, 2] -> ranks [5, 1, 3, 2, 4]; P ∝ 1/rank, sum = 137/60.
    ("rank", 1.0, 1.0, [0.5, 4.5, 2.5, 3.5, 1.5], np.array([12, 60, 20, 30, 15]) / 137, [1, 0.2, 0.6, 0.4, 0.8]),
    ("rank", 1.0, 0.5, [0.5, 4.5, 2.5, 3.5, 1.5], np.array([12, 60, 20, 30, 15]) / 137,
     np.sqrt([1, 0.2, 0.6, 0.4, 0.8])),
    ("uniform", 1.0, 1.0, [0.5, 4.5, 2.5, 3.5, 1.5], np.full(5, 0.2), np.ones(5)),
])
def test_probabilities_and_importance_weights(sampling, alpha, beta, delta, expected_p, expected_w):
    buffer = _five_steps(sampling, alpha, beta, delta)
    p = buffer.probabilities()
    np.testing.assert_allclose(p, expected_p, rtol=1e-6)
    # (1 / (N P(i)))^beta relative to the buffer's largest weight ...
    formula = (1.0 / (5 * p)) ** beta
    np.testing.assert_allclose(formula / formula.max(), expected_w, rtol=1e-6)
    # ... and the batch carries them normalised by the largest weight in the batch.
    batch, positions = buffer.sample(64)
    in_batch = np.asarray(expected_w)[positions]
    np.testing.assert_allclose(batch.importance_weight, in_batch / in_batch.max(), rtol=1e-5)


@pytest.mark.parametrize("sampling", ["proportional", "rank", "uniform"])
def test_sampling_frequencies_follow_probabilities(sampling):
    buffer = _five_steps(sampling, 1.0, 1.0, [0.5, 4.5, 2.5, 3.5, 1.5])
    p = buffer.probabilities()
    draws = 20 * 1000
    counts = np.zeros(5)
    for _ in range(20):
        _, positions = buffer.sample(1000)
        counts += np.bincount(positions, minlength=5)
    sigma = np.sqrt(draws * p * (1 - p))
    assert np.all(np.abs(counts - draws * p) < 5 * sigma), (counts / draws, p)


def test_update_priorities_changes_probabilities_and_ignores_evicted_positions():
    buffer = _buffer(capacity=8, sampling="proportional", epsilon=1.0)
    buffer.add(_trajectory(4, first_value=0.0))  # positions 0..3, delta = |v*| = [0, 1, 2, 3]
    np.testing.assert_allclose(buffer.probabilities(), np.array([1, 2, 3, 4]) / 10)
    buffer.update_priorities([1, 1, 3], [5.0, 2.0, 0.0])  # position 1 given twice: the last value wins
    np.testing.assert_allclose(buffer.probabilities(), np.array([1, 3, 3, 1]) / 8)
    buffer.add(_trajectory(4, first_value=10.0))  # positions 4..7
    buffer.add(_trajectory(3, first_value=0.0))  # evicts positions 0..3
    before = buffer.probabilities()
    buffer.update_priorities([0, 2], [100.0, 100.0])  # evicted: ignored
    np.testing.assert_array_equal(buffer.probabilities(), before)
    with pytest.raises(ValueError):
        buffer.update_priorities([11], [1.0])  # never stored


def test_rank_between_resorts_uses_the_snapshot_rank():
    config = ReplayConfig(capacity=100, min_fill=1, sampling="rank", priority_exponent=1.0,
                          priority_epsilon=0.5, rank_resort_fraction=0.5)
    buffer = ReplayBuffer(config, TARGETS, SPEC, seed=0)
    buffer.add(_trajectory(10, first_value=0.0))  # scores 0.5 .. 9.5 -> ranks 10 .. 1 after the first sort
    p = buffer.probabilities()
    harmonic = np.sum(1.0 / np.arange(1, 11))
    np.testing.assert_allclose(p, 1.0 / np.arange(10, 0, -1) / harmonic)
    # One change (<= half the buffer): position 0 gets its snapshot rank (score 7.5 beats 2 scores -> rank 3)
    # without a re-sort; the others keep theirs.
    buffer.update_priorities([0], [7.0])
    leaves = 1.0 / np.array([3, 9, 8, 7, 6, 5, 4, 3, 2, 1])
    np.testing.assert_allclose(buffer.probabilities(), leaves / leaves.sum())
    # Enough changes trigger an exact re-sort: ties rank the older step first.
    buffer.update_priorities([1, 2, 3, 4, 5], [7.0, 7.0, 7.0, 7.0, 7.0])
    # scores: [7.5]*6 at positions 0-5, then 6.5, 7.5, 8.5, 9.5 -> order 9, 8, 0, 1, 2, 3, 4, 5, 7, 6
    ranks = np.empty(10)
    ranks[[9, 8, 0, 1, 2, 3, 4, 5, 7, 6]] = np.arange(1, 11)
    np.testing.assert_allclose(buffer.probabilities(), (1.0 / ranks) / harmonic)


def test_rank_resorts_a_fresh_fill_even_with_the_fraction_at_one():
    config = ReplayConfig(capacity=100, min_fill=1, sampling="rank", priority_exponent=1.0,
                          priority_epsilon=0.5, rank_resort_fraction=1.0)
    buffer = ReplayBuffer(config, TARGETS, SPEC, seed=0)
    buffer.add(_trajectory(10, first_value=0.0))  # every score changed: ranks 10 .. 1, not all 1
    ranks = np.arange(10, 0, -1)
    np.testing.assert_allclose(buffer.probabilities(), (1.0 / ranks) / np.sum(1.0 / ranks))


# ---------------------------------------------------------------- storage and eviction


def test_fifo_eviction_of_whole_trajectories_and_wraparound():
    buffer = _buffer(capacity=10, sampling="uniform")
    buffer.add(_trajectory(4, first_value=0.0, seed=1))  # positions 0..3
    buffer.add(_trajectory(4, first_value=4.0, seed=2))  # positions 4..7
    assert (len(buffer), buffer.num_trajectories) == (8, 2)
    buffer.add(_trajectory(4, first_value=8.0, seed=3))  # needs 4 free slots: drops the first episode
    assert (len(buffer), buffer.num_trajectories, buffer.oldest_position) == (8, 2, 4)
    batch, positions = buffer.sample(200)
    assert positions.min() >= 4 and positions.max() <= 11
    # v*_t = position here, even for the episode that wrapped around slots 8, 9, 0, 1.
    np.testing.assert_allclose(batch.root_values[:, 0], positions)
    # The wrapped episode's targets equal those computed from its own arrays in a fresh buffer.
    fresh = _buffer(capacity=4, sampling="uniform")
    fresh.add(_trajectory(4, first_value=8.0, seed=3))
    reference = make_targets(fresh._storage, np.arange(4), config=TARGETS, num_actions=3, discount_sign=1.0)
    got = make_targets(buffer._storage, np.arange(8, 12) % 10, config=TARGETS, num_actions=3, discount_sign=1.0)
    jax.tree.map(np.testing.assert_allclose, got, reference)
    with pytest.raises(MooziError):
        buffer.add(_trajectory(11))


@pytest.mark.parametrize("sampling", ["uniform", "proportional", "rank"])
def test_add_many_equals_adding_one_by_one_with_evictions(sampling):
    # Capacity 10 with episodes of 3-5 steps: the later episodes of one add_many evict slots that
    # earlier episodes of the same call wrote, so the held-back tree writes must keep their order.
    episodes = [_trajectory(3 + i % 3, first_value=i, seed=i) for i in range(9)]
    one_by_one, batched = _buffer(capacity=10, sampling=sampling), _buffer(capacity=10, sampling=sampling)
    for trajectory in episodes[:2]:
        one_by_one.add(trajectory)
    batched.add_many(episodes[:2])
    for trajectory in episodes[2:]:
        one_by_one.add(trajectory)
    batched.add_many(episodes[2:])
    a, b = one_by_one.state_dict(), batched.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    np.testing.assert_array_equal(one_by_one.probabilities(), batched.probabilities())
    if sampling != "uniform":
        # The tree's inner nodes too, not only its leaves: the root total and minimum decide sampling.
        np.testing.assert_array_equal(one_by_one._tree._sum, batched._tree._sum)
        np.testing.assert_array_equal(one_by_one._tree._min, batched._tree._min)


def test_add_many_keeps_the_tree_consistent_when_an_episode_is_refused():
    buffer, reference = _buffer(capacity=10, sampling="proportional"), _buffer(capacity=10, sampling="proportional")
    good = _trajectory(4, first_value=1.0, seed=1)
    with pytest.raises(MooziError):
        buffer.add_many([good, _trajectory(11)])
    reference.add(good)
    np.testing.assert_array_equal(buffer._tree._sum, reference._tree._sum)
    assert buffer._pending_weights is None


def test_sampled_targets_equal_make_targets_on_the_storage():
    buffer = _buffer(capacity=32, sampling="proportional")
    for i in range(4):
        buffer.add(_trajectory(6 + i, first_value=i, seed=i, reward=0.5))
    batch, positions = buffer.sample(16)
    reference = make_targets(buffer._storage, positions % 32, config=TARGETS, num_actions=3, discount_sign=1.0)
    jax.tree.map(np.testing.assert_allclose, batch._replace(importance_weight=None),
                 reference._replace(importance_weight=None))


def test_min_fill():
    buffer = _buffer(capacity=20, min_fill=10)
    assert not buffer.ready()
    buffer.add(_trajectory(6))
    assert not buffer.ready()
    buffer.add(_trajectory(4))
    assert buffer.ready()


def test_bytes_per_step_for_reference_games():
    breakout = EnvSpec("minatar:breakout", (10, 10, 4), 4, 1, binary_obs=True)
    tic_tac_toe = EnvSpec("openspiel:tic_tac_toe", (3, 3, 3), 10, 2, binary_obs=True)
    for spec, uniform_bytes in [(breakout, 463.0), (tic_tac_toe, 120.0)]:
        # obs (uint8) + action int16 + reward, v* f32 + p* f32 [A] + t, T int32 + legal bool [A]
        # + to_play int8 + delta f64 + trajectory ring (2 x int64); prioritized adds sum+min trees (2 x 2 x f64).
        for sampling, extra in [("uniform", 0.0), ("proportional", 32.0), ("rank", 32.0)]:
            buffer = ReplayBuffer(ReplayConfig(capacity=1024, min_fill=1, sampling=sampling), TARGETS, spec, 0)
            assert buffer.bytes_per_step() == uniform_bytes + extra


def test_observations_are_stored_as_uint8_when_binary():
    buffer = _buffer()
    assert buffer._storage.obs.dtype == np.uint8
    bad = _trajectory(3)._replace(obs=np.full((3, 2, 2, 1), 0.5, np.float32))
    with pytest.raises(ValueError):
        buffer.add(bad)
    float_spec = EnvSpec("test:float", (2, 2, 1), 3, 1, binary_obs=False)
    assert ReplayBuffer(ReplayConfig(capacity=4, min_fill=1), TARGETS, float_spec, 0)._storage.obs.dtype == np.float32


def test_8_bit_frames_are_stored_as_their_bytes_and_come_back_exactly_in_the_targets():
    # Atari-like frames: the bridge emits k / 255 as float32; replay keeps k (1 byte instead of 4).
    spec = EnvSpec("test:frames", (4, 4, 1), 3, 1, obs_levels=255)
    buffer = ReplayBuffer(ReplayConfig(capacity=64, min_fill=1, sampling="uniform"), TARGETS, spec, 0)
    assert buffer._storage.obs.dtype == np.uint8
    float_spec = EnvSpec("test:float", (4, 4, 1), 3, 1)
    float_bytes = ReplayBuffer(ReplayConfig(capacity=64, min_fill=1, sampling="uniform"), TARGETS, float_spec, 0).bytes_per_step()
    assert float_bytes - buffer.bytes_per_step() == 3 * 16  # 16 values, 3 bytes saved on each
    rng = np.random.default_rng(0)
    k = rng.integers(0, 256, (6, 4, 4, 1)).astype(np.uint8)
    k[0, 0, 0, 0], k[0, 0, 1, 0] = 0, 255
    frames = np.multiply(k, obs_scale(255), dtype=np.float32)  # as the gym bridge scales them
    buffer.add(_trajectory(6, spec=spec)._replace(obs=frames))
    np.testing.assert_array_equal(buffer._storage.obs[:6], k)
    targets, positions = buffer.sample(32)
    # History length 2, one channel: the stacked input's channel 1 is o_t itself, bit for bit.
    t = np.asarray(positions)
    np.testing.assert_array_equal(np.asarray(targets.stacked_obs)[..., 1], frames[t][..., 0])
    with pytest.raises(ValueError, match="obs_levels"):
        buffer.add(_trajectory(3, spec=spec)._replace(obs=np.full((3, 4, 4, 1), 0.3337, np.float32)))


@pytest.mark.parametrize("sampling", ["uniform", "proportional", "rank"])
@pytest.mark.parametrize("spec", [
    EnvSpec("atari:pong", (84, 84, 1), 7, 1, obs_levels=255),
    EnvSpec("minatar:breakout", (10, 10, 4), 4, 1, binary_obs=True),
    EnvSpec("gym:CartPole-v1", (1, 1, 4), 3, 1),
])
def test_replay_bytes_predicts_what_the_buffer_allocates(spec, sampling):
    config = ReplayConfig(capacity=1000, min_fill=1, sampling=sampling)
    assert replay_bytes(config, spec) == ReplayBuffer(config, TARGETS, spec, 0).bytes_per_step() * 1000


def test_obs_codec_round_trips_every_byte_exactly():
    spec = EnvSpec("test:frames", (1, 1, 256), 3, 1, obs_levels=255)
    frames = np.multiply(np.arange(256, dtype=np.uint8), obs_scale(255), dtype=np.float32).reshape(1, 1, 256)
    stored = encode_obs(frames, spec)
    assert stored.dtype == np.uint8 and np.array_equal(stored.ravel(), np.arange(256))
    np.testing.assert_array_equal(decode_obs(stored, 255), frames)
    np.testing.assert_array_equal(np.asarray(decode_obs(jnp.asarray(stored), 255, jnp)), frames)
    assert encode_obs(stored, spec) is stored  # already encoded: passed through
    assert encode_obs(frames, EnvSpec("test:float", (1, 1, 256), 3, 1)).dtype == np.float32


# ---------------------------------------------------------------- checkpoints, reanalyze, augmentation


@pytest.mark.parametrize("sampling", ["uniform", "proportional", "rank"])
def test_state_dict_round_trip_gives_identical_samples(sampling):
    a = _buffer(capacity=12, sampling=sampling, seed=1)
    for i in range(4):
        a.add(_trajectory(3 + i % 2, first_value=i, seed=i))
    _, positions = a.sample(4)
    a.update_priorities(positions, [3.0, 1.0, 4.0, 1.0])
    state = a.state_dict()
    assert all(isinstance(v, np.ndarray) and v.dtype != object for v in state.values())
    b = _buffer(capacity=12, sampling=sampling, seed=99)
    b.load_state_dict(state)
    for _ in range(3):
        batch_a, pos_a = a.sample(8)
        batch_b, pos_b = b.sample(8)
        np.testing.assert_array_equal(pos_a, pos_b)
        jax.tree.map(np.testing.assert_array_equal, batch_a, batch_b)
        a.add(_trajectory(4, seed=7))
        b.add(_trajectory(4, seed=7))
    np.testing.assert_array_equal(a.probabilities(), b.probabilities())
    assert a.stats() == b.stats()


def test_load_state_dict_from_another_sampling_mode_rebuilds_weights():
    a = _buffer(capacity=8, sampling="uniform")
    a.add(_trajectory(4, first_value=0.0))  # delta [0, 1, 2, 3], epsilon 0.5
    b = _buffer(capacity=8, sampling="proportional")
    b.load_state_dict(a.state_dict())
    np.testing.assert_allclose(b.probabilities(), np.array([0.5, 1.5, 2.5, 3.5]) / 8)
    with pytest.raises(MooziError):
        _buffer(capacity=9).load_state_dict(a.state_dict())


def test_reanalyze_round_trip_and_priority_refresh():
    buffer = _buffer(capacity=8, sampling="proportional", epsilon=1.0)
    original = _trajectory(4, first_value=0.0, seed=5)
    buffer.add(original)
    [(trajectory_id, stored)] = buffer.sample_trajectories(3)
    assert trajectory_id == 0
    for name in Trajectory._fields:
        np.testing.assert_array_equal(getattr(stored, name), getattr(original, name), err_msg=name)
    new_probs = np.tile(np.array([0.0, 0.5, 0.5], np.float32), (4, 1))
    buffer.replace_search_statistics(trajectory_id, np.array([3.0, 0.0, 1.0, -2.0]), new_probs)
    # Zero rewards and N >= T: G = 0, so delta = |v*| = [3, 0, 1, 2]; scores + 1.
    np.testing.assert_allclose(buffer.probabilities(), np.array([4, 1, 2, 3]) / 10)
    batch, positions = buffer.sample(16)
    np.testing.assert_allclose(batch.root_values[:, 0], np.array([3.0, 0.0, 1.0, -2.0])[positions])
    np.testing.assert_allclose(batch.action_probs[:, 0], new_probs[positions])
    # Once evicted, a late reanalyze result is dropped.
    buffer.add(_trajectory(6, first_value=1.0))
    buffer.replace_search_statistics(trajectory_id, np.zeros(4), new_probs)
    assert buffer.num_trajectories == 1 and buffer.oldest_position == 4


def test_augment_hook_is_applied_to_sampled_batches():
    seen = []

    def augment(batch, key):
        seen.append(np.asarray(key))
        return batch._replace(stacked_obs=1.0 - batch.stacked_obs)

    plain, augmented = _buffer(seed=3), _buffer(seed=3, augment=augment)
    for buffer in (plain, augmented):
        buffer.add(_trajectory(5))
    batch_plain, pos_plain = plain.sample(4)
    batch_aug, pos_aug = augmented.sample(4)
    np.testing.assert_array_equal(pos_plain, pos_aug)
    np.testing.assert_allclose(batch_aug.stacked_obs, 1.0 - batch_plain.stacked_obs)
    assert len(seen) == 1 and seen[0].shape == (2,)


def test_config_validation():
    assert ReplayConfig(sampling="rank").sampling is SamplingMode.RANK
    for bad in [{"sampling": "lifo"}, {"capacity": 0}, {"min_fill": 5, "capacity": 4}, {"priority_epsilon": 0.0}]:
        with pytest.raises(MooziError):
            ReplayConfig(**bad)


# ---------------------------------------------------------------- speed (reported, not asserted)


@pytest.mark.slow
def test_sampling_speed_at_a_million_steps(capsys):
    n = 1 << 20
    rng = np.random.default_rng(0)
    tree = SumTree(n)
    tree.set_all(rng.random(n))
    batch = 256
    start = time.perf_counter()
    for _ in range(100):
        leaves = tree.find(rng.random(batch) * tree.total)
        tree.update(leaves, rng.random(batch))
    tree_us = (time.perf_counter() - start) / (100 * batch) * 1e6

    spec = EnvSpec("openspiel:tic_tac_toe", (3, 3, 3), 10, 2, binary_obs=True)
    targets = TargetConfig(history_length=1, num_unroll_steps=5, td_steps=10, discount=1.0)
    results = {}
    trajectory = _trajectory(1000, spec=spec)
    for sampling in ["proportional", "rank"]:
        buffer = ReplayBuffer(ReplayConfig(capacity=1_000_000, min_fill=1, sampling=sampling), targets, spec, 0)
        start = time.perf_counter()
        for _ in range(1000):
            buffer.add(trajectory)
        add_s = time.perf_counter() - start
        jax.block_until_ready(buffer.sample(batch))  # compile (and the first full rank sort)
        start = time.perf_counter()
        for _ in range(20):
            out, positions = buffer.sample(batch)
            buffer.update_priorities(positions, rng.random(batch))
            jax.block_until_ready(out)
        results[sampling] = ((time.perf_counter() - start) / (20 * batch) * 1e6, add_s)
        assert len(buffer) == 1_000_000 and positions.min() >= 0
        assert np.all(np.asarray(out.importance_weight) <= 1.0)
    start = time.perf_counter()
    buffer._counters["changed_since_sort"] = len(buffer)
    buffer._resort_if_stale()
    resort_ms = (time.perf_counter() - start) * 1e3
    with capsys.disabled():
        print(f"\nsum tree find+update at 2^20 leaves: {tree_us:.2f} us/item")
        for sampling, (us, add_s) in results.items():
            print(f"{sampling}: sample+update_priorities at 1e6 steps, batch {batch}: {us:.2f} us/item "
                  f"(filling 1e6 steps took {add_s:.1f} s)")
        print(f"rank full re-sort at 1e6 steps: {resort_ms:.0f} ms")
    assert tree_us > 0


# ---------------------------------------------------------------- Stochastic MuZero's future observations


def test_future_observations_are_the_histories_at_the_next_k_steps():
    """With `future_observations` each batch is a StochasticTrainingTarget whose future_stacked_obs[:, k]
    is exactly the history input at t+k+1 (`history_windows` of the episode, extended past its end with
    zero frames and dummy actions); index 0 is the target's next_stacked_obs."""
    from moozi.core.reanalyze import history_windows
    from moozi.core.stochastic_loss import StochasticTrainingTarget

    L, K, A = TARGETS.history_length, TARGETS.num_unroll_steps, SPEC.num_actions
    buffer = _buffer(capacity=64, future_observations=True)
    episodes = [_trajectory(5, seed=1), _trajectory(7, seed=2)]
    for episode in episodes:
        buffer.add(episode)
    batch, positions = buffer.sample(64)
    assert isinstance(batch, StochasticTrainingTarget)
    channels = L * (SPEC.obs_shape[-1] + A)
    assert batch.future_stacked_obs.shape == (64, K, *SPEC.obs_shape[:2], channels)
    np.testing.assert_array_equal(batch.future_stacked_obs[:, 0], batch.target.next_stacked_obs)
    expected_by_episode = []
    for episode in episodes:
        T = len(episode.action)
        obs = np.concatenate([episode.obs, np.zeros((K, *SPEC.obs_shape), np.float32)])
        actions = np.concatenate([episode.action, np.zeros(K, np.int32)])  # the dummy action past the end
        windows = np.asarray(history_windows(obs, actions, L, A))  # [T + K]: step s's history input
        expected_by_episode.append((T, windows))
    seen_past_end = False
    for row, position in enumerate(positions):
        (T0, first), (_, second) = expected_by_episode
        t, windows = (position, first) if position < T0 else (position - T0, second)
        np.testing.assert_array_equal(batch.future_stacked_obs[row], windows[t + 1 : t + K + 1])
        np.testing.assert_array_equal(batch.target.stacked_obs[row], windows[t])
        # The one-step afterstate target's weight: gamma (1 here, one player) while o_{t+k+1} is not terminal.
        T = T0 if position < T0 else 7
        np.testing.assert_array_equal(batch.next_value_discount[row], [float(t + k + 1 < T - 1) for k in range(K)])
        seen_past_end |= t + K >= T
    assert seen_past_end  # some rows read past their episode's end (zero frames there)


def test_a_symmetry_augment_sees_the_future_observations_too():
    """The augment gets the whole StochasticTrainingTarget, so a symmetry can move the chance encoder's
    inputs with the element's own (a stand-in augment here marks both)."""
    def augment(batch, key):
        return batch._replace(target=batch.target._replace(stacked_obs=batch.target.stacked_obs + 1),
                              future_stacked_obs=batch.future_stacked_obs + 1)

    plain, augmented = _buffer(capacity=64, seed=5, future_observations=True), \
        _buffer(capacity=64, seed=5, future_observations=True, augment=augment)
    for buffer in (plain, augmented):
        for trajectory in (_trajectory(5, seed=1), _trajectory(7, seed=2)):
            buffer.add(trajectory)
    (batch, positions), (moved, moved_positions) = plain.sample(6), augmented.sample(6)
    np.testing.assert_array_equal(positions, moved_positions)
    np.testing.assert_array_equal(moved.future_stacked_obs, np.asarray(batch.future_stacked_obs) + 1)
    np.testing.assert_array_equal(moved.target.stacked_obs, np.asarray(batch.target.stacked_obs) + 1)
    np.testing.assert_array_equal(moved.next_value_discount, batch.next_value_discount)


def test_turns_that_repeat_take_their_signs_from_to_play():
    # Player 0 moves twice, player 1 twice, player 0 once and wins (+1 to the mover): from each
    # step's player to move the Monte-Carlo return is [1, 1, -1, -1, 1, 0].
    spec = EnvSpec("test:turns", (2, 2, 1), 3, 2, binary_obs=True, turns_alternate=False)
    returns = np.array([1.0, 1.0, -1.0, -1.0, 1.0, 0.0], np.float32)
    trajectory = _trajectory(6, spec=spec)._replace(
        to_play=np.array([0, 0, 1, 1, 0, 0], np.int32), reward=np.array([0, 0, 0, 0, 0, 1], np.float32),
        root_value=returns)
    buffer = ReplayBuffer(ReplayConfig(capacity=16, min_fill=1, sampling="proportional", priority_epsilon=0.5),
                          TARGETS, spec, seed=0)
    buffer.add(trajectory)
    np.testing.assert_allclose(buffer._delta[:6], 0.0)  # every v* equals its return: no priority
    batch, positions = buffer.sample(32)
    t = positions[:, None] + np.arange(TARGETS.num_unroll_steps + 1)[None, :]  # [B, K+1]
    expected = np.where(t < 6, returns[np.minimum(t, 5)], 0.0)
    np.testing.assert_allclose(np.asarray(n_step_returns(batch)), expected)
    # The same episode in an alternating game gets the steps of a repeated turn wrong.
    alternating = ReplayBuffer(ReplayConfig(capacity=16, min_fill=1), TARGETS,
                               EnvSpec("test:alternating", (2, 2, 1), 3, 2, binary_obs=True), seed=0)
    alternating.add(trajectory)
    np.testing.assert_allclose(alternating._delta[:6], [0, 2, 2, 0, 0, 0])
