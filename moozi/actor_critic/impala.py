"""IMPALA (Espeholt et al. 2018): an actor-critic learning from its actors' possibly older policy with
V-trace off-policy corrections (rlax). See docs/impala.md.

Its settings (`IMPALAConfig`, the `impala.*` section of moozi's config) and its learning step, pure:
V-trace targets and policy-gradient advantages (rlax) for a rollout played by a possibly older
behaviour policy mu, then one RMSProp step.

The rollout is aligned as moozi/actor_critic/rollout.py says. Values come from the current
parameters (the bootstrap v(o_T) included); the importance weights are pi(a_t | o_t) / mu(a_t | o_t).
Rewards are not clipped: the games played so far (MinAtar) give rewards in [0, 1]."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
import rlax

from moozi.actor_critic.learner import Learner, build_learner
from moozi.actor_critic.networks import ActorCriticTrainState, PolicyNetwork, check_torso
from moozi.actor_critic.rollout import (
    Rollout,
    loss_mask,
    transition_rewards_and_discounts,
)
from moozi.errors import MooziError


@dataclasses.dataclass(frozen=True)
class IMPALAConfig:
    """Defaults: the IMPALA paper's Atari settings (Espeholt et al. 2018, Table D.1 / G.1): RMSProp with
    decay 0.99 and epsilon 0.01, gradient norm clipped at 40, baseline cost 0.5, entropy cost 0.01,
    discount 0.99, V-trace with rho-bar = c-bar = 1 (lambda 1), step size 6e-4. Two departures, as
    PPO's defaults make them (moozi/actor_critic/ppo.py): the step size stays constant (the paper's
    falls linearly to 0, which ties a run to one length; `anneal_learning_rate=True` restores it), and
    the critic has a torso of its own (the `atari` preset shares one, as the paper does)."""

    num_envs: int = 32  # B: the actors' envs, one batch per rollout
    rollout_steps: int = 20  # T: the unroll length (the paper's 20)
    policy_lag: int = 1  # the actors play parameters one update old, as IMPALA's actors do (0: the latest)
    # True: the host loop's actor-learner queue (docs/impala.md): the learner updates on each worker's
    # rollout as it finishes, and the lag is whatever the queue gives (policy_lag is then not used).
    asynchronous: bool = False
    learning_rate: float = 6e-4
    anneal_learning_rate: bool = False
    anneal_env_steps: int = 10_000_000
    rmsprop_decay: float = 0.99
    rmsprop_epsilon: float = 0.01
    max_grad_norm: float = 40.0
    discount: float = 0.99
    vtrace_lambda: float = 1.0
    clip_rho_threshold: float = 1.0  # rho-bar: truncates the importance weight of the value targets
    clip_pg_rho_threshold: float = 1.0  # the truncation of the policy gradient's importance weight
    value_coef: float = 0.5  # the baseline cost
    entropy_coef: float = 0.01
    torso: str = "auto"  # as PPO's (moozi/actor_critic/networks.py)
    mlp_hidden_sizes: tuple[int, ...] = (256, 256)
    shared_torso: bool = False  # True: one torso for policy and critic (moozi/actor_critic/networks.py)

    def __post_init__(self):
        check_torso(self.torso, "impala.torso")
        for key in ("discount", "vtrace_lambda"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise MooziError(f"bad value {getattr(self, key)!r} for impala.{key}: expected 0 <= x <= 1")
        for key in ("learning_rate", "clip_rho_threshold", "clip_pg_rho_threshold", "max_grad_norm"):
            if getattr(self, key) <= 0:
                raise MooziError(f"bad value {getattr(self, key)!r} for impala.{key}: expected a positive number")
        for key in ("num_envs", "rollout_steps", "anneal_env_steps"):
            if getattr(self, key) < 1:
                raise MooziError(f"bad value {getattr(self, key)!r} for impala.{key}: expected a positive integer")
        if self.policy_lag not in (0, 1):
            raise MooziError(f"bad value {self.policy_lag!r} for impala.policy_lag: expected 0 or 1")


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

    def update(state: ActorCriticTrainState, rollout: Rollout, key):
        del key  # the update is deterministic
        grads, metrics = grad_fn(state.params, network, rollout, config)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        metrics["grad_norm"] = optax.global_norm(grads)
        return ActorCriticTrainState(optax.apply_updates(state.params, updates), opt_state), metrics

    return update


def make_learner(config: IMPALAConfig, obs_shape: tuple[int, ...], num_actions: int, *, num_envs: int | None = None,
                 rollout_steps: int | None = None, policy_lag: int | None = None, dtype: str = "float32") -> Learner:
    """IMPALA's network, optimizer and update for B x T rollouts (B, T and the lag from `config` unless given)."""
    return build_learner(config, obs_shape, num_actions, make_optimizer=make_optimizer, make_update=make_update,
                         updates_per_rollout=1, num_envs=num_envs, rollout_steps=rollout_steps,
                         policy_lag=policy_lag, dtype=dtype)
