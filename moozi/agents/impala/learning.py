"""IMPALA's learning step, pure: V-trace targets and policy-gradient advantages (rlax) for a rollout
played by a possibly older behaviour policy mu, then one RMSProp step.

The rollout is aligned as moozi/agents/actor_critic/rollout.py says. Values come from the current
parameters (the bootstrap v(o_T) included); the importance weights are pi(a_t | o_t) / mu(a_t | o_t).
Rewards are not clipped: the games played so far (MinAtar) give rewards in [0, 1].
"""

from __future__ import annotations

from collections.abc import Callable

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
from moozi.agents.impala.config import IMPALAConfig


def vtrace_targets(values, bootstrap_value, rewards, discounts, rhos, config: IMPALAConfig):
    """[T, B] V-trace TD errors (v_s - V(x_s)) and policy-gradient advantages, per env column."""
    v_t = jnp.concatenate([values[1:], bootstrap_value[None]])

    def one_env(v_tm1, v_t, r_t, discount_t, rho_tm1):
        out = rlax.vtrace_td_error_and_advantage(
            v_tm1, v_t, r_t, discount_t, rho_tm1, lambda_=config.vtrace_lambda,
            clip_rho_threshold=config.clip_rho_threshold, clip_pg_rho_threshold=config.clip_pg_rho_threshold,
        )
        return out.errors, out.pg_advantage

    return jax.vmap(one_env, in_axes=1, out_axes=1)(values, v_t, rewards, discounts, rhos)


def loss_fn(params, network: PolicyNetwork, rollout: Rollout, config: IMPALAConfig):
    T, B = rollout.action.shape
    obs = rollout.obs.reshape(T * B, *rollout.obs.shape[2:])
    logits, values = network.apply(params, obs, rollout.legal_actions.reshape(T * B, -1))
    logits, values = logits.reshape(T, B, -1), values.reshape(T, B)
    _, bootstrap_value = network.apply(params, rollout.next_obs, rollout.next_legal_actions)
    log_pi = jnp.take_along_axis(jax.nn.log_softmax(logits), rollout.action[..., None], -1)[..., 0]
    rhos = jnp.exp(log_pi - rollout.log_prob)
    rewards, discounts = transition_rewards_and_discounts(rollout, config.discount)
    errors, pg_advantage = vtrace_targets(values, jax.lax.stop_gradient(bootstrap_value), rewards, discounts,
                                          jax.lax.stop_gradient(rhos), config)
    mask = loss_mask(rollout)
    count = jnp.maximum(mask.sum(), 1.0)
    rescale = mask.size / count  # rlax averages over every row; masked rows contribute 0
    pg_loss = jax.vmap(rlax.policy_gradient_loss, in_axes=1)(logits, rollout.action, pg_advantage, mask)
    policy_loss = pg_loss.mean() * rescale
    value_loss = 0.5 * (errors**2 * mask).sum() / count
    entropy_loss = rlax.entropy_loss(logits.reshape(T * B, -1), mask.reshape(-1)) * rescale
    mean_total = policy_loss + config.value_coef * value_loss + config.entropy_coef * entropy_loss
    # The paper's losses are sums over the rollout's T x B transitions, not means (TorchBeast sums
    # them too), and its RMSProp epsilon (0.01) and gradient clip (40) are sized for gradients that
    # large: with means, the gradients are T x B times smaller, epsilon swamps RMSProp's denominator
    # and the step shrinks by about as much.
    total = mean_total * count
    metrics = {
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "policy_entropy": -entropy_loss,
        "importance_weight_mean": (rhos * mask).sum() / count,
        "total_loss": mean_total,  # per transition
    }
    return total, metrics


def make_optimizer(config: IMPALAConfig, samples_per_rollout: int) -> optax.GradientTransformation:
    learning_rate: float | optax.Schedule = config.learning_rate
    if config.anneal_learning_rate:
        learning_rate = optax.linear_schedule(config.learning_rate, 0.0, max(1, config.anneal_env_steps // samples_per_rollout))
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.rmsprop(learning_rate, decay=config.rmsprop_decay, eps=config.rmsprop_epsilon),
    )


def make_update(network: PolicyNetwork, optimizer: optax.GradientTransformation, config: IMPALAConfig) -> Callable:
    """`update(state, rollout, key) -> (state, metrics)`: one optimizer step on the whole rollout."""
    grad_fn = jax.grad(loss_fn, has_aux=True)

    def update(state: TrainState, rollout: Rollout, key):
        del key  # the update is deterministic
        grads, metrics = grad_fn(state.params, network, rollout, config)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        metrics["grad_norm"] = optax.global_norm(grads)
        return TrainState(optax.apply_updates(state.params, updates), opt_state), metrics

    return update


def make_learner(config: IMPALAConfig, obs_shape: tuple[int, ...], num_actions: int, *, num_envs: int | None = None,
                 rollout_steps: int | None = None, policy_lag: int | None = None, dtype: str = "float32") -> Learner:
    """IMPALA's network, optimizer and update for B x T rollouts (B, T and the lag from `config` unless given)."""
    num_envs = config.num_envs if num_envs is None else num_envs
    rollout_steps = config.rollout_steps if rollout_steps is None else rollout_steps
    network = make_policy_network(config.torso, config.mlp_hidden_sizes, obs_shape, num_actions,
                                  config.shared_torso, dtype)
    optimizer = make_optimizer(config, num_envs * rollout_steps)
    return Learner(network, optimizer, make_update(network, optimizer, config), num_envs, rollout_steps,
                   updates_per_rollout=1, policy_lag=config.policy_lag if policy_lag is None else policy_lag)
