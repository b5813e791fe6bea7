"""The parameter update (thesis 5.2.10): optimizer, schedule, target network, overfitting."""

import dataclasses
import functools

import chex
import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from moozi.core.train_step import (
    OptimizerConfig,
    TrainState,
    agent_variables,
    init_train_state,
    make_optimizer,
    make_schedule,
    make_train_step,
    run_decay,
)
from moozi.core.loss import LossConfig
from moozi.core.network import NetworkConfig, make_network
from moozi.errors import MooziError
from tests.helpers.batches import make_batch

OBS_SHAPE, L, A = (5, 5, 2), 2, 4
TINY_RESNET = NetworkConfig(
    kind="resnet", channels=8, representation_blocks=1, prediction_blocks=1, dynamics_blocks=1, head_hidden=32
)
METRIC_NAMES = (
    "policy_loss", "value_loss", "reward_loss", "consistency_loss", "l2_loss", "total_loss",
    "value_mean", "policy_entropy", "grad_norm", "learning_rate",
)  # fmt: skip
PERIOD = 3  # T of the shared learner
SHARED_CONFIG = OptimizerConfig(learning_rate=1e-2, warmup_steps=2, target_update_period=PERIOD)


@functools.cache
def _network(config=TINY_RESNET, obs_shape=OBS_SHAPE):
    return make_network(config, obs_shape=obs_shape, history_length=L, num_actions=A)


@functools.cache
def _train_step(network, loss_config, optimizer_config):
    # Cached so tests with the same configs share one compiled program.
    return make_train_step(network, loss_config, optimizer_config)


def _learner(optimizer_config, loss_config=LossConfig(), batch_size=4, num_unroll=2, network=None, **batch_kwargs):
    network = network or _network()
    obs_shape = (*network.input_shape[:2], network.input_shape[2] // L - A)
    batch = make_batch(3, batch_size=batch_size, num_unroll=num_unroll, obs_shape=obs_shape, **batch_kwargs)
    state = init_train_state(network, optimizer_config, jax.random.PRNGKey(0), batch.stacked_obs)
    return _train_step(network, loss_config, optimizer_config), state, batch


def _equal(a, b):
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: bool(jnp.array_equal(x, y)), a, b)))


@pytest.fixture(scope="module")
def run():
    """Seven updates of one small learner (warm-up 2, T = 3): states[i] is after i updates."""
    train_step, state, batch = _learner(SHARED_CONFIG)
    states, metrics, priorities = [state], [], []
    for i in range(7):
        state, m, p = train_step(state, batch, jax.random.PRNGKey(i))
        states.append(state)
        metrics.append(m)
        priorities.append(p)
    return states, metrics, priorities


def test_schedule_warmup_then_constant_or_cosine():
    constant = make_schedule(OptimizerConfig(learning_rate=1e-2, warmup_steps=4, schedule="constant"))
    np.testing.assert_allclose([constant(i) for i in (0, 2, 4, 1000)], [0.0, 5e-3, 1e-2, 1e-2], rtol=1e-6)
    cosine = make_schedule(OptimizerConfig(learning_rate=1e-2, warmup_steps=4, schedule="cosine", decay_steps=10))
    np.testing.assert_allclose([cosine(i) for i in (2, 4, 9, 14, 50)], [5e-3, 1e-2, 5e-3, 0.0, 0.0], atol=1e-8)
    no_warmup = make_schedule(OptimizerConfig(learning_rate=3e-3, warmup_steps=0))
    np.testing.assert_allclose(no_warmup(0), 3e-3, rtol=1e-6)
    with pytest.raises(MooziError):
        OptimizerConfig(schedule="linear")
    with pytest.raises(MooziError):
        OptimizerConfig(target_update_period=0)


@pytest.mark.slow
def test_cosine_over_the_run_scales_the_step_by_the_run_s_progress():
    config = OptimizerConfig(learning_rate=1e-2, warmup_steps=0, schedule="cosine", decay_over="run",
                             final_learning_rate_fraction=0.1)
    # The cosine from 1 to 0.1 over progress 0..1, then flat; the schedule itself stays at the peak.
    np.testing.assert_allclose([run_decay(config, p) for p in (0.0, 0.5, 1.0, 1.5)], [1.0, 0.55, 0.1, 0.1], rtol=1e-6)
    np.testing.assert_allclose(make_schedule(config)(10**6), 1e-2, rtol=1e-6)
    np.testing.assert_allclose(run_decay(OptimizerConfig(schedule="cosine"), 0.7), 1.0)  # decay_over="updates"
    # decay_start=0.6: the peak until 0.6 of the run, then the same cosine over the last 0.4.
    late = dataclasses.replace(config, decay_start=0.6)
    np.testing.assert_allclose([run_decay(late, p) for p in (0.0, 0.6, 0.8, 1.0, 1.5)], [1.0, 1.0, 0.55, 0.1, 0.1],
                               rtol=1e-6)
    for bad in (-0.1, 1.0):
        with pytest.raises(MooziError, match="decay_start"):
            dataclasses.replace(config, decay_start=bad)
    with pytest.raises(MooziError, match="decay_start needs"):
        OptimizerConfig(schedule="cosine", decay_start=0.5)  # decay_over="updates"
    with pytest.raises(MooziError, match="decay_over"):
        OptimizerConfig(decay_over="minutes")
    # One update at progress 0.5 moves the parameters 0.55 times as far as at progress 0 (Adam's step
    # is proportional to its rate), and logs that rate.
    train_step, state, batch = _learner(config)
    at_start, m0, _ = train_step(state, batch, jax.random.PRNGKey(0), 0.0)
    halfway, m1, _ = train_step(state, batch, jax.random.PRNGKey(0), 0.5)
    moved = lambda s: jax.tree.map(lambda a, b: a - b, s.params, state.params)  # noqa: E731
    jax.tree.map(lambda a, b: np.testing.assert_allclose(b, 0.55 * a, rtol=1e-4, atol=1e-7), moved(at_start), moved(halfway))
    np.testing.assert_allclose([m0["learning_rate"], m1["learning_rate"]], [1e-2, 5.5e-3], rtol=1e-6)


def test_run_progress_is_the_larger_share_of_the_run_s_limits():
    import time

    from moozi.config.schema import TrainConfig
    from moozi.training.counters import Counters
    from moozi.training.stopping import run_progress

    now = time.monotonic()
    counters = Counters(env_steps=250)
    assert run_progress(TrainConfig(), counters, now) == 0.0  # no planned length
    assert run_progress(TrainConfig(max_env_steps=1000), counters, now) == pytest.approx(0.25)
    # 30 s of a 1-minute run: 0.5 beats the env steps' 0.25.
    assert run_progress(TrainConfig(max_env_steps=1000, max_minutes=1.0), counters, now - 30) == pytest.approx(0.5, abs=1e-3)
    assert run_progress(TrainConfig(max_env_steps=100), counters, now) == 1.0  # past the limit: flat at the end
    # Resumed after 30 of its 60 planned minutes with the 30 it had left: at the restart the schedule is
    # where it stopped (0.5), and 15 minutes on, three quarters through; not back at 0 (the peak).
    resumed = TrainConfig(max_minutes=30.0)
    assert run_progress(resumed, Counters(), now, elapsed_before=1800.0) == pytest.approx(0.5, abs=1e-4)
    assert run_progress(resumed, Counters(), now - 900, elapsed_before=1800.0) == pytest.approx(0.75, abs=1e-4)
    # Given 90 more minutes instead, what was left stretches: 30 of 120 at the restart.
    assert run_progress(TrainConfig(max_minutes=90.0), Counters(), now, elapsed_before=1800.0) == pytest.approx(0.25, abs=1e-4)


def test_optimizer_clips_the_global_norm_before_adam():
    config = OptimizerConfig(learning_rate=1e-3, warmup_steps=0, max_grad_norm=1.0, adam_b1=0.9)
    optimizer = make_optimizer(config)
    params = {"a": jnp.zeros(2), "b": jnp.zeros(1)}
    grads = {"a": jnp.array([6.0, 0.0]), "b": jnp.array([8.0])}  # global norm 10
    _, opt_state = optimizer.update(grads, optimizer.init(params), params)
    adam_state = opt_state[1][0]
    assert isinstance(adam_state, optax.ScaleByAdamState)
    # Adam's first moment after one update is (1 - b1) times the clipped gradient.
    np.testing.assert_allclose(adam_state.mu["a"], [0.1 * 0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(adam_state.mu["b"], [0.1 * 0.8], rtol=1e-6)


def test_decoupled_weight_decay_shrinks_kernels_by_rate_times_decay_and_leaves_biases():
    config = OptimizerConfig(learning_rate=1e-2, warmup_steps=0, weight_decay=0.5)
    optimizer = make_optimizer(config)
    params = {"kernel": jnp.full((2, 3), 2.0), "bias": jnp.full((3,), 2.0)}
    zero = jax.tree.map(jnp.zeros_like, params)  # Adam's own step is then 0: only the decay moves them
    updates, _ = optimizer.update(zero, optimizer.init(params), params)
    np.testing.assert_allclose(updates["kernel"], -1e-2 * 0.5 * 2.0, rtol=1e-6)
    np.testing.assert_array_equal(updates["bias"], 0.0)
    # Without it the optimizer is plain Adam, with the state older checkpoints hold.
    plain = make_optimizer(OptimizerConfig(learning_rate=1e-2, warmup_steps=0))
    assert jax.tree.structure(plain.init(params)) != jax.tree.structure(optimizer.init(params))
    assert isinstance(plain.init(params)[1][0], optax.ScaleByAdamState)
    with pytest.raises(MooziError, match="optimizer.weight_decay must be >= 0"):
        OptimizerConfig(weight_decay=-1e-4)


@pytest.mark.slow
def test_init_train_state(run):
    states, _, _ = run
    state = states[0]
    assert isinstance(state, TrainState)
    assert int(state.step) == 0 and state.step.dtype == jnp.int32
    assert _equal(state.target_params, state.params)
    assert _equal(state.target_batch_stats, state.batch_stats)


@pytest.mark.slow
def test_train_step_outputs(run):
    states, metrics, priorities = run
    assert [int(s.step) for s in states] == list(range(8))
    for name in METRIC_NAMES:
        chex.assert_shape(metrics[0][name], ())
        assert np.isfinite(metrics[0][name]), name
    chex.assert_shape(priorities[0], (4,))
    assert bool(jnp.all(priorities[0] >= 0))
    np.testing.assert_allclose(priorities[0], jnp.abs(priorities[0]), rtol=0)
    # Warm-up 2: rates 0, lr/2, lr, lr, ...
    np.testing.assert_allclose([float(m["learning_rate"]) for m in metrics[:4]], [0.0, 5e-3, 1e-2, 1e-2], rtol=1e-6)
    assert float(metrics[0]["grad_norm"]) > 0.0
    assert _equal(states[1].params, states[0].params)  # learning rate 0 at the first update
    assert not _equal(states[2].params, states[1].params)
    # Training mode moved the running moments even when the parameters did not.
    assert not _equal(states[1].batch_stats, states[0].batch_stats)


@pytest.mark.slow
def test_target_network_refreshes_every_t_updates(run):
    states, _, _ = run
    for step in range(1, 8):
        refreshed = states[PERIOD * (step // PERIOD)]
        assert _equal(states[step].target_params, refreshed.params), step
        assert _equal(states[step].target_batch_stats, refreshed.batch_stats), step
    assert not _equal(states[3].target_params, states[0].target_params)
    assert not _equal(states[5].target_params, states[5].params)


@pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
def test_target_network_as_a_moving_average():
    decay = 0.75
    config = OptimizerConfig(learning_rate=1e-2, warmup_steps=0, target_ema_decay=decay)
    train_step, state, batch = _learner(config)
    expected = agent_variables(state, "online")
    for i in range(3):
        state, _, _ = train_step(state, batch, jax.random.PRNGKey(i))
        online = agent_variables(state, "online")
        # After every update: target <- d·target + (1 - d)·online, moments with the parameters.
        expected = jax.tree.map(lambda t, o: decay * t + (1 - decay) * o, expected, online)
        chex.assert_trees_all_close(agent_variables(state, "target"), expected, rtol=1e-5, atol=1e-7)
    assert not _equal(state.target_params, state.params)
    with pytest.raises(MooziError, match="target_ema_decay"):
        OptimizerConfig(target_ema_decay=1.0)
    with pytest.raises(MooziError, match="online"):
        agent_variables(state, "averaged")


def test_train_state_roundtrips_through_msgpack(run):
    state = run[0][-1]
    restored = flax.serialization.from_bytes(state, flax.serialization.to_bytes(state))
    assert _equal(restored, state)
    assert all(isinstance(leaf, (np.ndarray, jax.Array)) for leaf in jax.tree.leaves(state))


@pytest.mark.slow  # 10-18 s on 2 vCPUs (compilation): kept out of the quick subset
def test_target_network_bootstrap_trains():
    config = OptimizerConfig(learning_rate=1e-3, warmup_steps=0)
    loss_config = LossConfig(bootstrap_from="target_network")
    # A small MLP: this checks the plumbing of target variables, cheaply compiled.
    mlp = _network(NetworkConfig(kind="mlp", mlp_hidden_sizes=(16,), mlp_hidden_state_size=8, head_hidden=8), (1, 1, 3))
    train_step, state, batch = _learner(config, loss_config, network=mlp, with_bootstrap_obs=True)
    state, metrics, priorities = train_step(state, batch, jax.random.PRNGKey(0))
    assert np.isfinite(metrics["total_loss"]) and priorities.shape == (4,)
    assert int(state.step) == 1


@pytest.mark.slow
def test_overfitting_one_batch_drives_every_term_down():
    # The shared learner's configs, so its compiled train step is reused.
    train_step, state, batch = _learner(SHARED_CONFIG)
    # Policy cross-entropy cannot go below the targets' entropy; compare the excess over it.
    entropy = -jnp.sum(batch.action_probs * jnp.log(batch.action_probs), -1)  # [B, K+1]
    entropy = float(jnp.mean(entropy[:, 0] + jnp.mean(entropy[:, 1:], -1)))
    history = []
    for i in range(150):
        state, metrics, _ = train_step(state, batch, jax.random.PRNGKey(i))
        history.append({k: float(v) for k, v in metrics.items()})
    first, last = history[0], history[-1]
    assert last["policy_loss"] - entropy < 0.3 * (first["policy_loss"] - entropy), (first, last)
    for name in ("value_loss", "reward_loss", "consistency_loss", "total_loss"):
        assert last[name] < 0.5 * first[name], (name, first[name], last[name])
