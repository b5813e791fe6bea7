"""Reanalyze (thesis 5.2.11): re-run the search on stored trajectories with the latest parameters.

Only the search statistics change: p*_t and v*_t are replaced, while the
actions (they were executed in the env and must stay consistent with the
observations), observations, rewards and flags are left as they were. The
re-search's own action is discarded.

Root noise: the Dirichlet noise is switched off, since it exists to diversify
*acting*, and targets are better without it (MuZero Reanalyse). Gumbel
MuZero's Gumbel noise is kept (with the configured `gumbel_scale`): it is how
that policy samples which root actions to consider, and its improved-policy
target assumes it.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from moozi.core.planner import PlannerConfig, make_muzero_model, make_planner, reanalyze_planner_config, search_discount
from moozi.core.types import Array, Trajectory
from moozi.envs.base import DUMMY_ACTION, EnvSpec
from moozi.core.history import stack_history

ReanalyzeBatchFn = Callable[[Any, Array, Array, Array], tuple[Array, Array]]
ReanalyzeTrajectoryFn = Callable[[Any, Trajectory, Array], Trajectory]


def _make_search(network, planner_config: PlannerConfig, spec: EnvSpec):
    model = make_muzero_model(network, search_discount(planner_config, spec))
    planner = make_planner(reanalyze_planner_config(planner_config), model)

    def search(params, stacked_obs, legal_actions, rng):
        out = planner(params, rng, stacked_obs, legal_actions)
        return out.root_value, out.action_probs

    return search


def make_reanalyze_fn(network, planner_config: PlannerConfig, spec: EnvSpec) -> ReanalyzeBatchFn:
    """Builds the jitted `reanalyze_batch(params, stacked_obs [B, H, W, C_h], legal_actions [B, A], rng)`.

    Returns (root_value [B], action_probs [B, A]): the new v* and p*.
    """
    return jax.jit(_make_search(network, planner_config, spec))


def history_windows(obs, actions, history_length: int, num_actions: int):
    """Every step's history input [T, H, W, C_h] from one episode's obs [T, H, W, C] and actions [T].

    Step t sees frames o_{t-L+1..t} and actions a_{t-L..t-1}, with zero frames
    and the dummy action before t = 0 (thesis 5.2.4, 5.2.6), exactly what
    `push_history` + `history_input` build while acting. Jittable.
    """
    length = history_length
    num_steps = obs.shape[0]
    obs = jnp.asarray(obs, jnp.float32)
    # Padded so that row t + j of both holds step t's j-th history entry:
    # padded_obs[k] = o_{k-L+1}, padded_actions[k] = a_{k-L}.
    padded_obs = jnp.concatenate([jnp.zeros((length - 1, *obs.shape[1:]), obs.dtype), obs], axis=0)
    padded_actions = jnp.concatenate(
        [jnp.full((length,), DUMMY_ACTION, jnp.int32), jnp.asarray(actions, jnp.int32)[: num_steps - 1]], axis=0
    )
    index = jnp.arange(num_steps)[:, None] + jnp.arange(length)[None, :]  # [T, L]
    return stack_history(padded_obs[index], padded_actions[index], num_actions)


def bucket_size(num_steps: int, max_batch: int, min_bucket: int) -> int:
    """The padded length for `num_steps`: a power of two up to `max_batch`, then a multiple of it.

    Few distinct lengths means few compilations; chunks of at most `max_batch`
    bound the search tree's memory (it holds B * (simulations + 1) embeddings).
    """
    if num_steps <= max_batch:
        return min(max_batch, max(min_bucket, 1 << max(0, num_steps - 1).bit_length()))
    return -(-num_steps // max_batch) * max_batch


def make_reanalyze_trajectory_fn(
    network,
    planner_config: PlannerConfig,
    spec: EnvSpec,
    history_length: int,
    *,
    max_batch: int = 256,
    min_bucket: int = 16,
) -> ReanalyzeTrajectoryFn:
    """Builds `reanalyze_trajectory(params, trajectory, rng) -> Trajectory` (host-side shell).

    The trajectory is padded to `bucket_size` steps (padding rows: zero frames,
    dummy actions, only the dummy legal) and searched in chunks of at most
    `max_batch` steps, each one jitted call; the result is the input trajectory
    with only `root_value` and `action_probs` replaced (their dtypes kept).
    """
    if min_bucket > max_batch:
        raise ValueError(f"min_bucket ({min_bucket}) must not exceed max_batch ({max_batch})")
    search = _make_search(network, planner_config, spec)
    num_actions = spec.num_actions

    @jax.jit
    def search_chunk(params, padded_obs, padded_actions, legal_actions, rng):
        # padded_obs [C + L - 1, H, W, C_e] starts L - 1 frames before the chunk's first step,
        # padded_actions [C + L] starts L actions before it (see `history_windows`).
        num_steps = legal_actions.shape[0]
        index = jnp.arange(num_steps)[:, None] + jnp.arange(history_length)[None, :]  # [C, L]
        stacked = stack_history(padded_obs[index], padded_actions[index], num_actions)
        return search(params, stacked, legal_actions, rng)

    def reanalyze_trajectory(params, trajectory: Trajectory, rng) -> Trajectory:
        num_steps = int(np.shape(trajectory.action)[0])
        padded_len = bucket_size(num_steps, max_batch, min_bucket)
        chunk = min(padded_len, max_batch)
        obs = np.asarray(trajectory.obs)
        pad = padded_len - num_steps
        # Leading history padding (before t = 0) and trailing bucket padding in one array.
        obs_all = np.concatenate(
            [np.zeros((history_length - 1, *obs.shape[1:]), obs.dtype), obs, np.zeros((pad, *obs.shape[1:]), obs.dtype)]
        )
        # a_{t-1} feeds step t, so the action row is the trajectory's actions shifted by one.
        actions_all = np.concatenate(
            [
                np.full((history_length,), DUMMY_ACTION, np.int32),
                np.asarray(trajectory.action, np.int32),
                np.full((pad,), DUMMY_ACTION, np.int32),
            ]
        )
        legal_pad = np.zeros((pad, num_actions), bool)
        legal_pad[:, DUMMY_ACTION] = True
        legal_all = np.concatenate([np.asarray(trajectory.legal_actions, bool), legal_pad])

        values, probs = [], []
        for i, key in enumerate(jax.random.split(rng, padded_len // chunk)):
            start = i * chunk
            v, p = search_chunk(
                params,
                obs_all[start : start + chunk + history_length - 1],
                actions_all[start : start + chunk + history_length],
                legal_all[start : start + chunk],
                key,
            )
            values.append(v)
            probs.append(p)
        root_value = np.concatenate([np.asarray(v) for v in values])[:num_steps]
        action_probs = np.concatenate([np.asarray(p) for p in probs])[:num_steps]
        return trajectory._replace(
            root_value=root_value.astype(np.asarray(trajectory.root_value).dtype),
            action_probs=action_probs.astype(np.asarray(trajectory.action_probs).dtype),
        )

    return reanalyze_trajectory
