"""PPO's learning step, pure: GAE targets from a rollout (aligned as moozi/agents/actor_critic/rollout.py
says), the clipped loss, and epochs of shuffled minibatch updates. GAE and the policy and entropy
losses are rlax's."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
import rlax

from moozi.agents.actor_critic.learner import Learner
from moozi.agents.actor_critic.networks import PolicyNetwork, TrainState, make_policy_network
from moozi.agents.actor_critic.rollout import (
    Rollout,
    loss_mask,
    transition_rewards_and_discounts,
)
from moozi.agents.ppo.config import PPOConfig


class Batch(NamedTuple):
    """Flat samples [N, ...] the loss sees."""

    obs: jax.Array
    legal_actions: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    advantage: jax.Array
    value_target: jax.Array
    mask: jax.Array  # float32: 1 where a real action was taken


def advantages(rollout: Rollout, discount: float, gae_lambda: float) -> tuple[jax.Array, jax.Array]:
    """GAE(lambda) advantages [T, B] and value targets A + v_old."""
    next_reward, discount_t = transition_rewards_and_discounts(rollout, discount)
    values = jnp.concatenate([rollout.value, rollout.next_value[None]])  # [T+1, B]
    gae = jax.vmap(rlax.truncated_generalized_advantage_estimation, in_axes=(1, 1, None, 1), out_axes=1)
    adv = gae(next_reward, discount_t, gae_lambda, values)
    return adv, adv + rollout.value


def flatten(rollout: Rollout, advantage: jax.Array, value_target: jax.Array) -> Batch:
    def flat(x):
        return x.reshape(-1, *x.shape[2:])

    return Batch(
        obs=flat(rollout.obs),
        legal_actions=flat(rollout.legal_actions),
        action=flat(rollout.action),
        log_prob=flat(rollout.log_prob),
        value=flat(rollout.value),
        advantage=flat(advantage),
        value_target=flat(value_target),
        mask=flat(loss_mask(rollout)),
    )


def loss_fn(params, network: PolicyNetwork, batch: Batch, config: PPOConfig):
    """The clipped surrogate + c_v * value loss - c_e * entropy, averaged over the masked samples."""
    logits, value = network.apply(params, batch.obs, batch.legal_actions)
    log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), batch.action[:, None], axis=-1)[:, 0]
    log_ratio = log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    mask = batch.mask
    count = jnp.maximum(mask.sum(), 1.0)
    # rlax averages over all N rows; masked rows contribute 0, so rescale to a mean over real ones.
    rescale = mask.shape[0] / count
    adv = batch.advantage
    if config.normalize_advantages:
        mean = (adv * mask).sum() / count
        std = jnp.sqrt((((adv - mean) * mask) ** 2).sum() / count)
        adv = (adv - mean) / (std + 1e-8)
    policy_loss = rlax.clipped_surrogate_pg_loss(ratio, adv * mask, config.clip_epsilon) * rescale
    value_error = (value - batch.value_target) ** 2
    if config.clip_value:
        clipped = batch.value + jnp.clip(value - batch.value, -config.clip_epsilon, config.clip_epsilon)
        value_error = jnp.maximum(value_error, (clipped - batch.value_target) ** 2)
    value_loss = 0.5 * (value_error * mask).sum() / count
    entropy_loss = rlax.entropy_loss(logits, mask) * rescale  # minus the mean entropy
    total = policy_loss + config.value_coef * value_loss + config.entropy_coef * entropy_loss
    metrics = {
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "policy_entropy": -entropy_loss,
        "approx_kl": (((ratio - 1.0) - log_ratio) * mask).sum() / count,
        "clip_fraction": ((jnp.abs(ratio - 1.0) > config.clip_epsilon) * mask).sum() / count,
        "total_loss": total,
    }
    return total, metrics


def make_optimizer(config: PPOConfig, samples_per_rollout: int) -> optax.GradientTransformation:
    """Adam (cleanrl's eps) after global-norm clipping; the step size falls linearly to 0 over
    `anneal_env_steps` when annealing is on (counted in optimizer steps: epochs x minibatches a rollout)."""
    learning_rate: float | optax.Schedule = config.learning_rate
    if config.anneal_learning_rate:
        steps_per_rollout = config.num_epochs * config.num_minibatches
        total_steps = max(1, config.anneal_env_steps // samples_per_rollout * steps_per_rollout)
        learning_rate = optax.linear_schedule(config.learning_rate, 0.0, total_steps)
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate, eps=config.adam_epsilon),
    )


def make_update(network: PolicyNetwork, optimizer: optax.GradientTransformation, config: PPOConfig) -> Callable:
    """`update(state, rollout, key) -> (state, metrics)`: GAE, then `num_epochs` passes of
    `num_minibatches` shuffled minibatches. Pure; jit it (or call it inside a jitted loop)."""
    grad_fn = jax.grad(loss_fn, has_aux=True)

    def minibatch_step(state: TrainState, minibatch: Batch):
        grads, metrics = grad_fn(state.params, network, minibatch, config)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        metrics["grad_norm"] = optax.global_norm(grads)
        return TrainState(optax.apply_updates(state.params, updates), opt_state), metrics

    def epoch(state: TrainState, key, batch: Batch):
        n = batch.action.shape[0]
        m = config.num_minibatches
        if n % m:
            raise ValueError(f"a rollout of {n} samples does not split into ppo.num_minibatches={m}")
        order = jax.random.permutation(key, n)
        minibatches = jax.tree.map(lambda x: x[order].reshape(m, n // m, *x.shape[1:]), batch)
        return jax.lax.scan(minibatch_step, state, minibatches)

    def update(state: TrainState, rollout: Rollout, key):
        advantage, value_target = advantages(rollout, config.discount, config.gae_lambda)
        batch = flatten(rollout, advantage, value_target)
        state, metrics = jax.lax.scan(
            lambda s, k: epoch(s, k, batch), state, jax.random.split(key, config.num_epochs)
        )
        return state, jax.tree.map(jnp.mean, metrics)

    return update


def make_learner(config: PPOConfig, obs_shape: tuple[int, ...], num_actions: int, *, num_envs: int | None = None,
                 rollout_steps: int | None = None, policy_lag: int | None = None, dtype: str = "float32") -> Learner:
    """PPO's network, optimizer and update for B x T rollouts (B, T and the lag from `config` unless given)."""
    num_envs = config.num_envs if num_envs is None else num_envs
    rollout_steps = config.rollout_steps if rollout_steps is None else rollout_steps
    network = make_policy_network(config.torso, config.mlp_hidden_sizes, obs_shape, num_actions,
                                  config.shared_torso, dtype)
    optimizer = make_optimizer(config, num_envs * rollout_steps)
    return Learner(network, optimizer, make_update(network, optimizer, config), num_envs, rollout_steps,
                   updates_per_rollout=config.num_epochs * config.num_minibatches, policy_lag=config.policy_lag if policy_lag is None else policy_lag)
