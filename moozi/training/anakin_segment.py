"""The Anakin self-play segment (Podracer, thesis 3.9.6): a whole stretch of self-play as one program.

For JAX-native games (pgx, gymnax) the B envs and the acting function live in
one jitted XLA program:

    carry, records = segment(params, carry, rng, epsilon, num_steps=T)

It runs T steps with `jax.lax.scan`. Each step acts on the current env output
of all B envs (history push + search), plays a uniformly random legal move
instead of the search's with probability `epsilon` (epsilon-greedy
exploration; p* stays the search's), writes that step sample into the [T, B]
records, and steps the envs with `jax.vmap(env.step)`. The env contract
resets every env whose output was last, so the loop never branches on
episode ends, and nothing leaves the device until the segment returns.

Randomness, fixed so that a host loop can reproduce a segment exactly:
`rng` is split into T step keys; step t splits its key into (act key, env
key, exploration key) and the env key into B per-env keys.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from moozi.core.acting import ActFn
from moozi.core.planner import SearchStats
from moozi.envs.base import JaxEnv, StepOutput
from moozi.core.history import HistoryState, init_history
from moozi.core.types import Array


class AnakinCarry(NamedTuple):
    """What one segment hands to the next: every env's state and the acting state, batched [B]."""

    env_state: Any  # the JaxEnv's state pytree, leaves [B, ...]
    step: StepOutput  # [B] o_t: the env output not yet acted on
    history: HistoryState  # [B, L]: o_{t-L}..o_{t-1} and their actions (acting pushes o_t)
    last_action: Array  # [B] int32: a_{t-1}, the action that led to o_t


class StepRecord(NamedTuple):
    """One step sample of every env; a segment returns them stacked [T, B]."""

    obs: Array  # [B, H, W, C] float32: o_t
    is_first: Array  # [B] bool
    is_last: Array  # [B] bool
    reward: Array  # [B] float32: r_t, the reward for arriving at o_t
    legal_actions: Array  # [B, A] bool
    to_play: Array  # [B] int32
    action: Array  # [B] int32: a_t (the dummy on is_last steps)
    root_value: Array  # [B] float32: v*_t
    action_probs: Array  # [B, A] float32: p*_t
    stats: SearchStats  # [B] each

    def step_output(self) -> StepOutput:
        return StepOutput(self.obs, self.is_first, self.is_last, self.reward, self.legal_actions, self.to_play)


def init_carry(env: JaxEnv, num_envs: int, history_length: int, key) -> AnakinCarry:
    """B fresh episodes with an empty history. Pure; jit it with `num_envs` and `history_length` static."""
    env_state, step = jax.vmap(env.init)(jax.random.split(key, num_envs))
    return AnakinCarry(
        env_state=env_state,
        step=step,
        history=init_history(num_envs, history_length, env.spec.obs_shape),
        last_action=jnp.zeros((num_envs,), jnp.int32),
    )


def explore(key, action, legal_actions, is_last, epsilon):
    """Epsilon-greedy: each row [B] plays a uniformly random legal action with probability epsilon
    (never on is_last steps, where the dummy is the only move)."""
    coin_key, pick_key = jax.random.split(key)
    coin = jax.random.uniform(coin_key, action.shape) < epsilon  # [B]
    random_action = jax.random.categorical(pick_key, jnp.where(legal_actions, 0.0, -jnp.inf))  # [B]
    return jnp.where(coin & ~is_last, random_action, action).astype(jnp.int32)


def anakin_step(
    env: JaxEnv, act_fn: ActFn, params, carry: AnakinCarry, key, epsilon=0.0
) -> tuple[AnakinCarry, StepRecord]:
    """One self-play step of B envs: act on o_t, record the step sample, step the envs. Pure."""
    act_key, env_key, explore_key = jax.random.split(key, 3)
    step = carry.step
    history, out = act_fn(params, carry.history, step, carry.last_action, carry.env_state, act_key)
    action = explore(explore_key, out.action, step.legal_actions, step.is_last, epsilon)
    record = StepRecord(
        obs=step.obs,
        is_first=step.is_first,
        is_last=step.is_last,
        reward=step.reward,
        legal_actions=step.legal_actions,
        to_play=step.to_play,
        action=action,
        root_value=out.root_value,
        action_probs=out.action_probs,
        stats=out.stats,
    )
    env_keys = jax.random.split(env_key, carry.last_action.shape[0])
    env_state, next_step = jax.vmap(env.step)(carry.env_state, action, step.is_last, env_keys)
    return AnakinCarry(env_state, next_step, history, action), record


def make_segment(env: JaxEnv, act_fn: ActFn) -> Callable[..., tuple[AnakinCarry, StepRecord]]:
    """The jitted `segment(params, carry, rng, epsilon, num_steps=T) -> (carry, records [T, B])`.

    `epsilon` is a traced scalar (a schedule changes it without recompiling);
    `num_steps` is static: each distinct T compiles once, and a worker that
    always asks for the same T (`train.rollout_steps`) compiles once in all.
    """

    def segment(params, carry: AnakinCarry, rng, epsilon, num_steps: int):
        def body(carry, key):
            return anakin_step(env, act_fn, params, carry, key, epsilon)

        return jax.lax.scan(body, carry, jax.random.split(rng, num_steps))

    return jax.jit(segment, static_argnames="num_steps")
