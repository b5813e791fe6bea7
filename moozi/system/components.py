"""Builds the pieces every role needs from one Config: env factory, spec, network, planners."""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp

from moozi.config import Config
from moozi.core.acting import make_act
from moozi.core.network import Network, make_network
from moozi.core.planner import PlannerConfig
from moozi.core.symmetry import board_symmetry, make_symmetry_augment
from moozi.envs.base import Env, EnvSpec
from moozi.envs.action_planes import action_planes
from moozi.envs.registry import make_env, resolve_game_name

# Options each library's bridge accepts from EnvConfig.
_STICKY_LIBRARIES = ("minatar", "atari", "gymnax")
_FULL_ACTION_LIBRARIES = ("minatar", "atari")


def env_options(config: Config) -> dict:
    """The bridge options that EnvConfig sets for this game's library."""
    library = resolve_game_name(config.game).split(":", 1)[0]
    options = {}
    if config.env.sticky_action_prob is not None and library in _STICKY_LIBRARIES:
        options["sticky_action_prob"] = config.env.sticky_action_prob
    if config.env.full_action_space and library in _FULL_ACTION_LIBRARIES:
        options["full_action_space"] = True
    return options


def env_factory(config: Config) -> Callable[[], Env]:
    """A picklable zero-argument factory (VectorEnv sends it to its worker processes)."""
    return functools.partial(make_env, config.game, **env_options(config))


@functools.lru_cache(maxsize=32)
def _spec_for(game: str, options: tuple) -> EnvSpec:
    env = make_env(game, **dict(options))
    spec = env.spec
    close = getattr(env, "close", None)
    if close is not None:
        close()
    return spec


def env_spec(config: Config) -> EnvSpec:
    return _spec_for(config.game, tuple(sorted(env_options(config).items())))


def symmetry_augment(config: Config, spec: EnvSpec):
    """The replay buffer's augment function for this game, or None (no symmetry, or turned off)."""
    if not config.replay.symmetry_augmentation:
        return None
    symmetry = board_symmetry(resolve_game_name(config.game), spec.obs_shape)
    if symmetry is None:
        return None
    return make_symmetry_augment(symmetry, spec.num_actions, spec.obs_shape[-1], config.targets.history_length)


def make_acting(config: Config, spec: EnvSpec, planner_config: PlannerConfig):
    """The jitted `act(params, history, step [B], last_action [B], env_state [B], rng)` of the
    config's agent. MuZero ignores `env_state` (pass None); AlphaZero searches from it."""
    network = build_network(config, spec)
    if config.agent == "alphazero":
        from moozi.core.alphazero import make_alphazero_act_fn

        env = make_env(config.game, **env_options(config))
        return jax.jit(make_alphazero_act_fn(env, network, planner_config, spec))
    act = make_act(network, planner_config, spec, config.targets.history_length)

    def muzero_act(params, history, step, last_action, env_state, rng):
        del env_state
        return act(params, history, step, last_action, rng)

    return jax.jit(muzero_act)


def build_network(config: Config, spec: EnvSpec) -> Network:
    return make_network(
        config.network,
        obs_shape=spec.obs_shape,
        history_length=config.targets.history_length,
        num_actions=spec.num_actions,
        action_planes=action_planes(spec),
    )


def example_stacked_obs(config: Config, spec: EnvSpec, batch_size: int = 1):
    h, w, c = spec.obs_shape
    channels = config.targets.history_length * (c + spec.num_actions)
    return jnp.zeros((batch_size, h, w, channels), jnp.float32)


def greedy_planner_config(config: PlannerConfig) -> PlannerConfig:
    """The testing worker's and evaluation's search: no root noise, argmax action.

    Gumbel MuZero's root noise is its Gumbel sample, so gumbel_scale goes to 0 too
    (otherwise the "greedy" agent samples its moves)."""
    return dataclasses.replace(config, dirichlet_fraction=0.0, temperature=0.0, gumbel_scale=0.0)


def reanalyze_planner_config(config: PlannerConfig) -> PlannerConfig:
    """Reanalyze re-searches without exploration noise (thesis 5.2.11)."""
    return dataclasses.replace(config, dirichlet_fraction=0.0)


def seed_key(seed: int, *path: int):
    """A JAX key for one role, derived from the run's seed and the role's path."""
    key = jax.random.key(seed)
    for p in path:
        key = jax.random.fold_in(key, p)
    return key
