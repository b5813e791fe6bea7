"""Random training targets with the contract's shapes, for loss and train-step tests."""

import jax.numpy as jnp
import numpy as np

from moozi.core.types import TrainingTarget

OBS_SHAPE, L, A = (5, 5, 2), 2, 4


def make_batch(
    seed, *, batch_size, num_unroll, obs_shape=OBS_SHAPE, history_length=L, num_actions=A, with_bootstrap_obs=False
):
    """A TrainingTarget of random data with the contract's shapes and value ranges.

    Built with numpy from an integer seed: no XLA program to compile.
    """
    height, width, channels = obs_shape
    input_shape = (height, width, history_length * (channels + num_actions))
    gen = np.random.default_rng(seed)
    B, K = batch_size, num_unroll
    logits = 2.0 * gen.normal(size=(B, K + 1, num_actions))
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return TrainingTarget(
        stacked_obs=f32(gen.uniform(size=(B, *input_shape))),
        next_stacked_obs=f32(gen.uniform(size=(B, *input_shape))),
        actions=jnp.asarray(gen.integers(0, num_actions, (B, K)), jnp.int32),
        rewards=f32(gen.uniform(-3.0, 3.0, (B, K))),
        action_probs=f32(probs),
        policy_mask=jnp.ones((B, K + 1)),
        root_values=f32(gen.uniform(-2.0, 2.0, (B, K + 1))),
        partial_return=f32(gen.uniform(-3.0, 3.0, (B, K + 1))),
        bootstrap_discount=jnp.full((B, K + 1), 0.9**3),
        bootstrap_value=f32(gen.uniform(-2.0, 2.0, (B, K + 1))),
        consistency_mask=jnp.ones((B,)),
        importance_weight=jnp.ones((B,)),
        bootstrap_stacked_obs=f32(gen.uniform(size=(B, K + 1, *input_shape))) if with_bootstrap_obs else None,
    )
