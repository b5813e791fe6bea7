"""network.dtype="bfloat16": layers compute in bfloat16, parameters, outputs and losses stay float32.

The tolerance: on this batch the first update's loss terms differ from float32's by at most 0.33%
(policy loss of the MLP; the resnet's terms by at most 0.14%, measured 2026-11-27), so 1% leaves
room for other XLA versions while a wrong cast (bfloat16 logits into the softmax, a bfloat16 loss)
would still show.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from moozi.actor_critic.networks import make_policy_network
from moozi.config import build_config
from moozi.config.overrides import ConfigError
from moozi.core.loss import LossConfig
from moozi.core.network import NetworkConfig, make_network
from moozi.core.stochastic_network import make_stochastic_network
from moozi.core.train_step import OptimizerConfig, init_train_state, make_train_step
from moozi.errors import MooziError
from tests.helpers.batches import OBS_SHAPE, A, L, make_batch

MLP = NetworkConfig(kind="mlp", mlp_hidden_sizes=(32,), mlp_hidden_state_size=16, head_hidden=16)
RESNET = NetworkConfig(kind="resnet", channels=8, representation_blocks=1, prediction_blocks=1, dynamics_blocks=1,
                       head_hidden=16)
OPTIMIZER = OptimizerConfig(learning_rate=1e-2, warmup_steps=0)
LOSS_TERMS = ("total_loss", "policy_loss", "value_loss", "reward_loss", "consistency_loss")


def _bf16(config):
    return dataclasses.replace(config, dtype="bfloat16")


def _network(config):
    return make_network(config, obs_shape=OBS_SHAPE, history_length=L, num_actions=A)


@functools.cache
def _updates(config, steps=8):
    """`steps` updates of one batch from the same initial parameters: (states, metrics per update)."""
    batch = make_batch(3, batch_size=8, num_unroll=3)
    network = _network(config)
    state = init_train_state(network, OPTIMIZER, jax.random.PRNGKey(0), batch.stacked_obs)
    train_step = make_train_step(network, LossConfig(), OPTIMIZER)
    states, metrics = [state], []
    for i in range(steps):
        state, m, _ = train_step(state, batch, jax.random.PRNGKey(i))
        states.append(state)
        metrics.append({k: float(v) for k, v in m.items()})
    return states, metrics


def _dtypes(tree):
    return {leaf.dtype for leaf in jax.tree.leaves(tree)}


@pytest.mark.slow
@pytest.mark.parametrize("config", [MLP, RESNET], ids=["mlp", "resnet"])
def test_bfloat16_computes_in_bfloat16_on_float32_parameters(config):
    network = _network(_bf16(config))
    obs = jnp.asarray(np.random.default_rng(0).uniform(size=(2, *network.input_shape)), jnp.float32)
    variables = jax.jit(network.init)(jax.random.PRNGKey(0), obs)
    assert _dtypes(variables) == {jnp.dtype(jnp.float32)}
    # The layers' arithmetic is bfloat16: the compiled computation holds bfloat16 matmuls or convolutions.
    program = str(jax.make_jaxpr(network.initial_inference)(variables, obs))
    assert "bf16" in program and "bf16" not in str(jax.make_jaxpr(_network(config).initial_inference)(variables, obs))
    out = jax.jit(network.initial_inference)(variables, obs)
    recurrent = jax.jit(network.recurrent_inference)(variables, out.hidden_state, jnp.ones((2,), jnp.int32))
    projected = jax.jit(network.project)(variables, out.hidden_state)
    # What leaves the network (logits, values, rewards, hidden states) is float32 for the search and the loss.
    assert _dtypes((out, recurrent, projected)) == {jnp.dtype(jnp.float32)}


@pytest.mark.slow
def test_stochastic_network_follows_the_dtype():
    network = make_stochastic_network(_bf16(MLP), obs_shape=OBS_SHAPE, history_length=L, num_actions=A,
                                      num_chance_outcomes=3)
    obs = jnp.asarray(np.random.default_rng(0).uniform(size=(2, *network.input_shape)), jnp.float32)
    variables = jax.jit(network.init)(jax.random.PRNGKey(0), obs)
    out = jax.jit(network.initial_inference)(variables, obs)
    after = jax.jit(network.afterstate_inference)(variables, out.hidden_state, jnp.ones((2,), jnp.int32))
    chance = jax.jit(network.chance_inference)(variables, obs, obs)
    assert _dtypes(variables) == _dtypes((out, after, chance)) == {jnp.dtype(jnp.float32)}
    assert "bf16" in str(jax.make_jaxpr(network.initial_inference)(variables, obs))


@pytest.mark.slow
def test_one_update_in_bfloat16_has_float32_losses_close_to_float32s():
    _, exact = _updates(MLP, 1)
    states, mixed = _updates(_bf16(MLP))
    for term in LOSS_TERMS:
        assert np.isfinite(mixed[0][term]), term
        np.testing.assert_allclose(mixed[0][term], exact[0][term], rtol=1e-2, err_msg=term)
    assert mixed[0]["total_loss"] != exact[0]["total_loss"]  # bfloat16 did change the arithmetic
    assert _dtypes(states[1].params) == _dtypes(states[1].opt_state) - {jnp.dtype(jnp.int32)} == {jnp.dtype(jnp.float32)}


@pytest.mark.slow
def test_a_few_bfloat16_updates_stay_finite_and_learn():
    states, metrics = _updates(_bf16(MLP))
    assert all(np.isfinite(m[term]) for m in metrics for term in LOSS_TERMS)
    assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(states[-1].params))
    assert metrics[-1]["total_loss"] < 0.8 * metrics[0]["total_loss"]  # the same batch: the loss falls


def test_actor_critic_in_bfloat16():
    torso, obs_shape = "mlp", (10, 10, 4)
    obs = jnp.asarray(np.random.default_rng(0).uniform(size=(3, *obs_shape)), jnp.float32)
    legal = jnp.ones((3, 5), bool)
    exact = make_policy_network(torso, (32,), obs_shape, 5, shared_torso=False)
    mixed = make_policy_network(torso, (32,), obs_shape, 5, shared_torso=False, dtype="bfloat16")
    params = exact.init(jax.random.PRNGKey(0), obs)
    assert jax.tree.all(jax.tree.map(lambda a, b: a.shape == b.shape and a.dtype == b.dtype, params,
                                     mixed.init(jax.random.PRNGKey(0), obs)))
    assert _dtypes(params) == {jnp.dtype(jnp.float32)}
    logits, value = jax.jit(mixed.apply)(params, obs, legal)
    assert logits.dtype == value.dtype == jnp.float32
    exact_logits, exact_value = jax.jit(exact.apply)(params, obs, legal)
    # bfloat16 keeps 8 bits of mantissa: outputs of unit scale agree to a few hundredths.
    np.testing.assert_allclose(logits, exact_logits, atol=3e-2)
    np.testing.assert_allclose(value, exact_value, atol=5e-2)
    assert "bf16" in str(jax.make_jaxpr(mixed.apply)(params, obs, legal))


def test_network_dtype_is_off_by_default_and_checked():
    assert build_config("tic_tac_toe").network.dtype == "float32"
    assert build_config("tic_tac_toe", overrides={"network.dtype": "bfloat16"}).network.dtype == "bfloat16"
    with pytest.raises(ConfigError, match=r"bad value 'float16' for network\.dtype: expected one of 'float32', 'bfloat16'"):
        build_config("tic_tac_toe", overrides={"network.dtype": "float16"})
    with pytest.raises(MooziError, match="network.dtype must be one of float32, bfloat16"):
        NetworkConfig(dtype="float64")
