"""Builds what the roles and a loaded agent need from one Config: envs, spec, network, acting.

Training, evaluation and `load_agent` all build here, so a loaded agent acts
exactly as it did in training without importing the training package.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import jax
import jax.numpy as jnp

from moozi.config import Config
from moozi.core.acting import ActFn, capped_act, make_muzero_act
from moozi.core.alphazero import make_alphazero_act
from moozi.core.alphazero_chance import make_alphazero_chance_act
from moozi.core.loss import LossConfig, loss_fn
from moozi.core.network import Network, make_network
from moozi.core.planner import PlannerConfig, fast_planner_config, search_discount
from moozi.core.stochastic_loss import StochasticLossConfig, stochastic_loss_fn
from moozi.core.stochastic_network import make_stochastic_network
from moozi.core.stochastic_planner import make_stochastic_planner
from moozi.core.symmetry import board_symmetry, make_symmetry_augment
from moozi.envs.base import Env, EnvSpec
from moozi.envs.afterstates import EXACT_CHANCE_GAMES, chance_rules_of
from moozi.envs.action_planes import action_features, action_planes, point_actions
from moozi.envs.jax_vector import JaxVectorEnv
from moozi.envs.registry import is_jax_native, make_env, resolve_game_name
from moozi.envs.vector import VectorEnv
from moozi.errors import MooziError

# Options each library's bridge accepts from EnvConfig.
_STICKY_LIBRARIES = ("minatar", "atari", "gymnax")
_FULL_ACTION_LIBRARIES = ("minatar", "atari")
# Input-feature options: the games (a resolved-name prefix) whose bridge computes them, and how errors name those.
_FEATURE_GAMES = {"go_features": ("pgx:go_", "pgx's go (go9 in AlphaZero mode)"),
                  "backgammon_features": ("pgx:backgammon", "pgx's backgammon")}


def env_options(config: Config) -> dict:
    """The bridge options that EnvConfig sets for this game's library."""
    library = resolve_game_name(config.game).split(":", 1)[0]
    options = {}
    if config.env.sticky_action_prob is not None and library in _STICKY_LIBRARIES:
        options["sticky_action_prob"] = config.env.sticky_action_prob
    if config.env.full_action_space and library in _FULL_ACTION_LIBRARIES:
        options["full_action_space"] = True
    for key, (prefix, games) in _FEATURE_GAMES.items():
        if getattr(config.env, key):
            if not resolve_game_name(config.game).startswith(prefix):
                raise MooziError(f"env.{key} is for {games}; {config.game} is not")
            options[key] = True
    return options


def env_key(config: Config) -> tuple[str, tuple]:
    """(game, its bridge options as sorted pairs): a hashable key for what the config's env is, by
    which the spec, AlphaZero's act and the Anakin segment are memoized."""
    return config.game, tuple(sorted(env_options(config).items()))


def env_factory(config: Config) -> Callable[[], Env]:
    """A picklable zero-argument factory (VectorEnv sends it to its worker processes)."""
    return functools.partial(make_env, config.game, **env_options(config))


@functools.lru_cache(maxsize=32)
def _spec_for(game: str, options: tuple) -> EnvSpec:
    env = make_env(game, **dict(options))
    spec = env.spec
    env.close()
    return spec


def env_spec(config: Config) -> EnvSpec:
    return _spec_for(*env_key(config))


def symmetry_augment(config: Config, spec: EnvSpec):
    """The replay buffer's augment function for this game, or None (no symmetry, or turned off)."""
    if not config.replay.symmetry_augmentation:
        return None
    symmetry = board_symmetry(resolve_game_name(config.game), spec.obs_shape)
    if symmetry is None:
        return None
    return make_symmetry_augment(symmetry, spec.num_actions, spec.obs_shape[-1], config.targets.history_length)


def searches_env_state(config: Config) -> bool:
    """Whether the config's agent searches from the env's own state (AlphaZero: the rules are its model),
    so its `act` must be given the vectorized env's `state`; MuZero's ignores it (pass None)."""
    return config.agent == "alphazero"


def learns_chance_outcomes(config: Config) -> bool:
    """Whether the config's agent is Stochastic MuZero (docs/stochastic.md): its model has afterstates and
    learned chance codes, its replay batches carry the future observations the chance encoder reads
    (`StochasticTrainingTarget`), and its learner minimises `stochastic_loss_fn`."""
    return config.agent == "stochastic_muzero"


def learns_territory(config: Config, spec: EnvSpec) -> bool:
    """Whether the run trains ownership and score heads (`loss.ownership_coef`, `loss.score_coef` > 0):
    its network has them and its replay batches carry the final-state targets (moozi/core/territory.py).
    A clear error where the game gives no such targets."""
    wanted = config.loss.ownership_coef > 0 or config.loss.score_coef > 0
    if wanted and spec.territory is None:
        raise MooziError(f"loss.ownership_coef / loss.score_coef: {spec.name} gives no ownership or score targets "
                         "(territory games only, e.g. go9); set both to 0")
    if wanted and learns_chance_outcomes(config):
        raise MooziError("loss.ownership_coef / loss.score_coef: not for agent=stochastic_muzero")
    return wanted


def make_act(config: Config, spec: EnvSpec, planner_config: PlannerConfig, rules: tuple = ()) -> ActFn:
    """The pure, unjitted `act` (`moozi.core.acting.ActFn`) of the config's agent.

    The one place where the agent kind is chosen: training and testing workers,
    the Anakin segment, reanalyze, `load_agent` and the position evaluation all
    build their acting here, each with its own planner config. `rules` (AlphaZero only): bridge
    options as sorted pairs on top of the config's, for a search over another variant of the game
    (pgx's go with the komi and length of the OpenSpiel game an agent plays).
    """
    chance_outcomes = config.stochastic.num_chance_outcomes if learns_chance_outcomes(config) else None
    if planner_config.score_utility > 0 and not (config.agent == "alphazero" and config.loss.score_coef > 0
                                                 and learns_territory(config, spec)):
        raise MooziError("planner.score_utility needs agent=alphazero on a territory game whose network learns the "
                         f"score (loss.score_coef > 0, e.g. go9); got agent={config.agent}, game {spec.name}, "
                         f"loss.score_coef={config.loss.score_coef}")
    alphazero_env = None
    if config.agent == "alphazero":
        game, options = env_key(config)
        alphazero_env = (game, tuple(sorted({**dict(options), **dict(rules)}.items())))
    return _act(config.agent, build_network(config, spec), planner_config, spec, config.targets.history_length,
                chance_outcomes, alphazero_env)


# Built pieces are memoized by what they are built from (frozen dataclasses, all hashable). jax.jit
# caches a trace by the function it wraps, so a process that asks twice for the same network, act or
# update (an inline run's self-play and testing workers, load_agent after training, the position
# evaluation, a test suite's many tiny runs) traces, lowers and compiles it once.
@functools.lru_cache(maxsize=32)
def _act(agent: str, network: Network, planner_config: PlannerConfig, spec: EnvSpec, history_length: int,
         num_chance_outcomes: int | None, alphazero_env: tuple | None) -> ActFn:
    if agent == "alphazero":
        game, options = alphazero_env
        env = make_env(game, **dict(options))
        if planner_config.chance_search == "exact":  # chance nodes over the rules' exact split
            if chance_rules_of(env) is None:
                raise MooziError(f"planner.chance_search='exact': {game} gives no exact chance outcomes; "
                                 f"games that do: {', '.join(EXACT_CHANCE_GAMES)} (else 'sampled')")
            return make_alphazero_chance_act(env, network, planner_config, spec)
        return make_alphazero_act(env, network, planner_config, spec)
    planner = None  # MuZero's search over the learned model
    if num_chance_outcomes is not None:
        planner = make_stochastic_planner(planner_config, network, spec.num_actions, num_chance_outcomes,
                                          search_discount(planner_config, spec))
    return make_muzero_act(network, planner_config, spec, history_length, planner=planner)


def make_self_play_act(config: Config, spec: EnvSpec) -> ActFn:
    """The unjitted act of training self-play: the config's search, or with playout cap randomisation
    (`planner.full_search_share` < 1) the full and the fast search by a coin per step (`capped_act`)."""
    act = make_act(config, spec, config.planner)
    fast = fast_planner_config(config.planner)
    if fast is None:
        return act
    return capped_act(act, make_act(config, spec, fast), config.planner.full_search_share)


def make_acting(config: Config, spec: EnvSpec, planner_config: PlannerConfig, rules: tuple = ()) -> ActFn:
    """`make_act`, jitted: one compiled program per batch shape, shared by every caller in the process
    that builds the same act."""
    return jax.jit(make_act(config, spec, planner_config, rules))


def make_vector_env(config: Config, num_envs: int, seed: int, num_processes: int = 1):
    """B envs of the config's game: host envs over P processes, or a jitted batch for JAX-native games."""
    if is_jax_native(config.game):
        return JaxVectorEnv(make_env(config.game, **env_options(config)), num_envs, seed)
    return VectorEnv(env_factory(config), num_envs, num_processes=num_processes, seed=seed)


def build_network(config: Config, spec: EnvSpec) -> Network:
    """The config's network: MuZero's (h, g, f; AlphaZero uses h and f), or Stochastic MuZero's
    (`StochasticNetwork`: the same calls plus afterstates and the chance encoder, the same `init`).
    The same object for every config with the same network, game spec and history (see `_act`)."""
    chance_outcomes = config.stochastic.num_chance_outcomes if learns_chance_outcomes(config) else None
    # A learned model predicts whether the turn passes where turns may repeat; AlphaZero's search reads
    # it from the rules.
    predicts_turns = spec.per_step_turn_signs and not searches_env_state(config)
    return _network(config.network, spec, config.targets.history_length, chance_outcomes, predicts_turns,
                    learns_territory(config, spec))


@functools.lru_cache(maxsize=32)
def _network(network_config, spec: EnvSpec, history_length: int, num_chance_outcomes: int | None,
             predicts_turns: bool, territory_heads: bool = False) -> Network:
    shapes = dict(obs_shape=spec.obs_shape, history_length=history_length, num_actions=spec.num_actions,
                  action_planes=action_planes(spec), action_features=action_features(spec))
    if num_chance_outcomes is not None:
        if network_config.policy_head != "dense":
            raise MooziError("network.policy_head='conv' is not built for agent=stochastic_muzero; use 'dense'")
        return make_stochastic_network(network_config, num_chance_outcomes=num_chance_outcomes,
                                       predicts_turns=predicts_turns, **shapes)
    cells = point_actions(spec) if network_config.policy_head == "conv" else None
    return make_network(network_config, predicts_turns=predicts_turns, territory_heads=territory_heads,
                        point_actions=cells, **shapes)


def make_loss(config: Config) -> tuple[Callable, LossConfig]:
    """(loss function, its config) the learner minimises: loss.py's `loss_fn` on `config.loss`, or for
    Stochastic MuZero `stochastic_loss_fn` on `config.loss` plus the `stochastic.*` coefficients."""
    if not learns_chance_outcomes(config):
        return loss_fn, config.loss
    # Field by field, not dataclasses.asdict: that would turn nested sections into dicts.
    base = {f.name: getattr(config.loss, f.name) for f in dataclasses.fields(config.loss)}
    chance = config.stochastic
    return stochastic_loss_fn, StochasticLossConfig(
        **base,
        afterstate_value_coef=chance.afterstate_value_coef,
        afterstate_value_target=chance.afterstate_value_target,
        chance_coef=chance.chance_coef,
        commitment_coef=chance.commitment_coef,
        consistency_steps=chance.consistency_steps,
    )


def example_stacked_obs(config: Config, spec: EnvSpec, batch_size: int = 1):
    h, w, c = spec.obs_shape
    channels = config.targets.history_length * (c + spec.num_actions)
    return jnp.zeros((batch_size, h, w, channels), jnp.float32)


def seed_key(seed: int, *path: int):
    """A JAX key for one role, derived from the run's seed and the role's path."""
    key = jax.random.key(seed)
    for p in path:
        key = jax.random.fold_in(key, p)
    return key


ACTOR_CRITIC_AGENTS = ("ppo", "impala")


def is_actor_critic(config: Config) -> bool:
    """PPO and IMPALA (moozi/actor_critic): no search, no model, no replay buffer."""
    return config.agent in ACTOR_CRITIC_AGENTS


def is_asynchronous(config: Config) -> bool:
    """Whether the host loop runs the actor-learner queue (`impala.asynchronous`; PPO has no such mode)."""
    return config.agent == "impala" and config.impala.asynchronous


def make_actor_critic_learner(config: Config, spec: EnvSpec, num_envs: int | None = None):
    """The network, optimizer and update of the config's actor-critic agent (its `ppo.*` or `impala.*`
    section), for rollouts of `num_envs` envs (the section's B unless given), computing in `network.dtype`."""
    from moozi.actor_critic import make_learner
    from moozi.errors import MooziError

    if spec.is_two_player:
        raise MooziError(f"agent={config.agent} plays one-player games; {config.game} has two players "
                         "(train it with agent=muzero or agent=alphazero)")
    # network.dtype is the one setting of the network section the actor-critics read (their layers are
    # set in their own section): mixed precision is a property of the run, not of the agent kind.
    return make_learner(getattr(config, config.agent), spec.obs_shape, spec.num_actions, num_envs=num_envs,
                        dtype=config.network.dtype)


def make_anakin_actor_critic(config: Config, spec: EnvSpec):
    """The config's actor-critic on a JAX-native game: the Anakin loop, rollouts and update in one
    jitted program. (Host games run the host loop, moozi/training/actor_critic_host_loop.py.)"""
    from moozi.actor_critic.anakin_loop import AnakinTrainer

    return AnakinTrainer(make_env(config.game, **env_options(config)), make_actor_critic_learner(config, spec),
                         seed=config.seed)
