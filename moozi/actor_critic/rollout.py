"""Rollouts of an actor-critic on moozi's env contract (moozi/envs/base.py), and their alignment.

Step t holds o_t, the reward r_t for arriving at o_t, is_last_t, and the action a_t taken from o_t
(the dummy on is_last steps, which resets the env). The transition t -> t+1 earns r_{t+1} and
continues with discount gamma * (1 - is_last_{t+1}). A step with is_last_t took no real action, so
it carries no loss (`loss_mask`); the zero discount before it keeps one episode's returns from
leaking into the next.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from moozi.actor_critic.policy_step import act
from moozi.actor_critic.networks import PolicyNetwork
from moozi.envs.base import JaxEnv, StepOutput


class Rollout(NamedTuple):
    """T steps of B envs, leaves [T, B, ...], and what follows the last of them ([B, ...])."""

    obs: jax.Array  # [T, B, H, W, C] o_t
    legal_actions: jax.Array  # [T, B, A]
    reward: jax.Array  # [T, B] r_t, the reward for arriving at o_t
    is_last: jax.Array  # [T, B]
    action: jax.Array  # [T, B] a_t, sampled from the acting (behaviour) policy
    log_prob: jax.Array  # [T, B] log mu(a_t | o_t) under the acting policy
    value: jax.Array  # [T, B] the acting policy's v(o_t)
    next_obs: jax.Array  # [B, H, W, C] o_T
    next_legal_actions: jax.Array  # [B, A]
    next_reward: jax.Array  # [B] r_T
    next_is_last: jax.Array  # [B] is_last_T
    next_value: jax.Array  # [B] the acting policy's v(o_T), the bootstrap


def transition_rewards_and_discounts(rollout: Rollout, discount: float) -> tuple[jax.Array, jax.Array]:
    """[T, B] r_{t+1} and gamma * (1 - is_last_{t+1}): what the transition t -> t+1 earns and keeps."""
    next_reward = jnp.concatenate([rollout.reward[1:], rollout.next_reward[None]])
    next_is_last = jnp.concatenate([rollout.is_last[1:], rollout.next_is_last[None]])
    return next_reward, discount * (1.0 - next_is_last.astype(jnp.float32))


def loss_mask(rollout: Rollout) -> jax.Array:
    """[T, B] float32: 1 where a real action was taken (not on is_last steps)."""
    return (~rollout.is_last).astype(jnp.float32)


class RolloutCarry(NamedTuple):
    """What one rollout hands to the next, leaves [B, ...]."""

    env_state: Any
    step: StepOutput  # o_t, not yet acted on
    episode_return: jax.Array  # [B] the return so far of each env's current episode


class _Record(NamedTuple):
    obs: jax.Array
    legal_actions: jax.Array
    reward: jax.Array
    is_last: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    finished_return: jax.Array  # [B] the return of the episode that ends on o_{t+1}, else 0


def init_carry(env: JaxEnv, num_envs: int, key) -> RolloutCarry:
    env_state, step = jax.vmap(env.init)(jax.random.split(key, num_envs))
    return RolloutCarry(env_state, step, jnp.zeros((num_envs,), jnp.float32))


def make_rollout(env: JaxEnv, network: PolicyNetwork, num_steps: int, greedy: bool = False):
    """`rollout(params, carry, key) -> (carry, Rollout, finished [T, B] bool, returns [T, B])`, where
    `finished[t]` marks episodes that end on o_{t+1} and `returns[t]` their returns. Pure."""

    def body(params, carry: RolloutCarry, key):
        act_key, env_key = jax.random.split(key)
        step = carry.step
        policy = act(network, params, step.obs, step.legal_actions, act_key, greedy=greedy)
        env_keys = jax.random.split(env_key, step.reward.shape[0])
        env_state, next_step = jax.vmap(env.step)(carry.env_state, policy.action, step.is_last, env_keys)
        episode_return = jnp.where(next_step.is_first, 0.0, carry.episode_return + next_step.reward)
        record = _Record(
            step.obs, step.legal_actions, step.reward, step.is_last, policy.action, policy.log_prob, policy.value,
            jnp.where(next_step.is_last, episode_return, 0.0),
        )
        return RolloutCarry(env_state, next_step, episode_return), record

    def rollout(params, carry: RolloutCarry, key):
        carry, rec = jax.lax.scan(lambda c, k: body(params, c, k), carry, jax.random.split(key, num_steps))
        _, next_value = network.apply(params, carry.step.obs, carry.step.legal_actions)
        batch = Rollout(
            obs=rec.obs, legal_actions=rec.legal_actions, reward=rec.reward, is_last=rec.is_last,
            action=rec.action, log_prob=rec.log_prob, value=rec.value,
            next_obs=carry.step.obs, next_legal_actions=carry.step.legal_actions,
            next_reward=carry.step.reward, next_is_last=carry.step.is_last, next_value=next_value,
        )
        finished = jnp.concatenate([rec.is_last[1:], carry.step.is_last[None]])
        return carry, batch, finished, rec.finished_return

    return rollout
