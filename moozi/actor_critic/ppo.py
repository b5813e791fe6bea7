"""PPO (Schulman et al. 2017) on moozi's env contract: clipped surrogate objective, GAE, optional
value clipping, epochs of shuffled minibatches, advantage normalisation, an entropy bonus and a
linearly annealed learning rate, with the defaults of cleanrl's `ppo_atari` (docs/ppo.md).

Its settings (`PPOConfig`, the `ppo.*` section of moozi's config) and its learning step, pure: GAE
targets from a rollout (aligned as moozi/actor_critic/rollout.py says), the clipped loss, and epochs
of shuffled minibatch updates. GAE and the policy and entropy losses are rlax's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

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
class PPOConfig:
    """Defaults: gymnax-blines' PPO settings for the MinAtar games (Lange 2022, `agents/<game>-MinAtar/ppo.yaml`
    in the gymnax-blines repository): B = 64 envs, T = 128 steps, 4 epochs of 8 minibatches, clip 0.2,
    Adam at a constant 5e-4, and a critic with its own torso. The discount is cleanrl's 0.99
    (gymnax-blines use 0.999; 0.99 learned Breakout a little faster here, docs/ppo.md).

    The rest is cleanrl's (Huang et al. 2022, "The 37 implementation details of PPO"). For Atari frames,
    where the Nature CNN is the torso, the `atari` preset returns to cleanrl's `ppo_atari` settings
    (moozi/config/presets.py). With the cleanrl Atari settings on MinAtar Breakout (shared torso,
    clip 0.1, step 2.5e-4, 4 minibatches) the return stayed near 7 for 8M steps; with these it
    passed 19 by then (docs/ppo.md, "Results on this machine")."""

    num_envs: int = 64  # B: envs stepped together (more envs fill a CPU's vector units better)
    rollout_steps: int = 128  # T: steps each env takes per rollout (cleanrl's num_steps)
    # 0: each rollout is played by the latest parameters. 1: by the parameters one update older, Cleanba's
    # synchronous schedule (the learner trains on version i-1's data while the actors play version i).
    policy_lag: int = 0
    learning_rate: float = 5e-4  # Adam's (peak) step size
    # Off by default: annealing to 0 ties the run to one length (`anneal_env_steps`), and a run
    # resumed or extended past it would stop learning.
    anneal_learning_rate: bool = False
    anneal_env_steps: int = 10_000_000  # the horizon of the annealing when on (cleanrl: the run's total steps)
    adam_epsilon: float = 1e-5  # cleanrl's, not Adam's 1e-8
    discount: float = 0.99  # gamma
    gae_lambda: float = 0.95
    clip_epsilon: float = 0.2  # the surrogate's ratio clip
    clip_value: bool = True  # clip the value update to +-clip_epsilon around the rollout's value
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    max_grad_norm: float = 0.5
    num_epochs: int = 4  # passes over each rollout
    num_minibatches: int = 8  # each epoch's shuffled split of the B x T rollout
    normalize_advantages: bool = True  # per minibatch, as cleanrl does
    torso: str = "auto"  # "mlp", "nature_cnn", or "auto" (moozi/actor_critic/networks.py)
    mlp_hidden_sizes: tuple[int, ...] = (256, 256)
    # False: the critic has its own torso (moozi/actor_critic/networks.py). cleanrl's Atari
    # agent shares one; its agents for vector observations, gymnax-blines' and PureJaxRL's do not.
    shared_torso: bool = False

    def __post_init__(self):
        check_torso(self.torso, "ppo.torso")
        for key in ("num_envs", "rollout_steps", "num_epochs", "num_minibatches", "anneal_env_steps"):
            if getattr(self, key) < 1:
                raise MooziError(f"bad value {getattr(self, key)!r} for ppo.{key}: expected a positive integer")
        for key in ("discount", "gae_lambda"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise MooziError(f"bad value {getattr(self, key)!r} for ppo.{key}: expected 0 <= x <= 1")
        if self.policy_lag not in (0, 1):
            raise MooziError(f"bad value {self.policy_lag!r} for ppo.policy_lag: expected 0 or 1")
        if self.clip_epsilon <= 0 or self.learning_rate <= 0:
            raise MooziError("ppo.clip_epsilon and ppo.learning_rate must be positive")


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

    def minibatch_step(state: ActorCriticTrainState, minibatch: Batch):
        grads, metrics = grad_fn(state.params, network, minibatch, config)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        metrics["grad_norm"] = optax.global_norm(grads)
        return ActorCriticTrainState(optax.apply_updates(state.params, updates), opt_state), metrics

    def epoch(state: ActorCriticTrainState, key, batch: Batch):
        n = batch.action.shape[0]
        m = config.num_minibatches
        if n % m:
            raise ValueError(f"a rollout of {n} samples does not split into ppo.num_minibatches={m}")
        order = jax.random.permutation(key, n)
        minibatches = jax.tree.map(lambda x: x[order].reshape(m, n // m, *x.shape[1:]), batch)
        return jax.lax.scan(minibatch_step, state, minibatches)

    def update(state: ActorCriticTrainState, rollout: Rollout, key):
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
    return build_learner(config, obs_shape, num_actions, make_optimizer=make_optimizer, make_update=make_update,
                         updates_per_rollout=config.num_epochs * config.num_minibatches, num_envs=num_envs, rollout_steps=rollout_steps,
                         policy_lag=policy_lag, dtype=dtype)
