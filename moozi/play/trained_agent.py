"""A trained agent loaded from a run directory: search, greedy or sampled as in training, with its
best (or latest) parameters.

`moozi.load_agent(run_dir)` is the public entry point (README, "Using it"). The agent
plays host envs (`play_episode`) and OpenSpiel games through `pyspiel.Bot`
(`as_openspiel_bot`), so any OpenSpiel tool can play against it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pathlib
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from moozi.runs.checkpoint import best_checkpoint, latest_checkpoint, load_checkpoint
from moozi.config import Config, load_saved_config
from moozi.core.train_step import agent_variables, init_train_state
from moozi.envs.base import DUMMY_ACTION, StepOutput
from moozi.envs.registry import make_host_env
from moozi.errors import MooziError
from moozi.play.shipped import AGENT_VARIABLES, agent_directory
from moozi.core.history import init_history
from moozi.core.planner import play_planner_config
from moozi.actor_critic.policy_step import act as act_with_policy
from moozi.actor_critic.networks import ActorCriticTrainState, example_obs
from moozi.builders import (
    build_network,
    env_options,
    env_spec,
    example_stacked_obs,
    is_actor_critic,
    make_acting,
    make_actor_critic_learner,
    searches_env_state,
    seed_key,
)


class Agent:
    """MuZero search over a single env: greedy (no root noise, argmax) by default; with `sample`, the
    training workers' search (root noise, and the action drawn as in training).

    `simulations`: the search's simulations; None: the run's `planner.play_simulations` when greedy
    (its `num_simulations` when that is unset), its training `num_simulations` when sampled."""

    def __init__(self, config: Config, variables, *, checkpoint: pathlib.Path | None = None, sample: bool = False,
                 simulations: int | None = None):
        self.config = config
        self.spec = env_spec(config)
        self.variables = variables
        self.checkpoint = checkpoint
        # A greedy search can repeat one losing move where the sampled one would not: a MinAtar Freeway
        # run whose training episodes scored ~30 scored 5 or less in 13 of 100 greedy episodes (mean 24.7)
        # and in 4 of 100 sampled ones (mean 30.6). Sampled play is also how the MinAtar paper's curves
        # (epsilon-greedy training episodes) and our PPO/IMPALA evaluations act.
        self.sample = sample
        if sample:
            count = config.planner.num_simulations if simulations is None else simulations
            self.planner = dataclasses.replace(config.planner, num_simulations=count)
        else:
            self.planner = play_planner_config(config.planner, simulations)
        self.simulations = self.planner.num_simulations
        self._act = make_acting(config, self.spec, self.planner)
        self._key = seed_key(config.seed, 99)
        self.last_search = None  # the ActingOutput of the latest `act`, unbatched

    def new_history(self):
        return init_history(1, self.config.targets.history_length, self.spec.obs_shape)

    @property
    def batched_act(self):
        """The acting program over a batch of envs, as `act` plays:
        `(variables, history, step, last_action, env_state, key) -> (history, ActingOutput)`."""
        return self._act

    @property
    def needs_env_state(self) -> bool:
        """AlphaZero agents search from the game's own state, so `act` needs it."""
        return searches_env_state(self.config)

    def act(self, history, step: StepOutput, last_action: int, env_state=None):
        """One decision (greedy unless `sample`): returns (new history, augmented action, root value).

        `env_state` is the (unbatched) JaxEnv state at `step`; AlphaZero agents need it."""
        if self.needs_env_state and env_state is None:
            raise MooziError("an AlphaZero agent searches from the game's state: pass env_state to act()")
        batched = StepOutput(*(np.asarray(x)[None] for x in step))
        if env_state is not None:
            env_state = jax.tree.map(lambda x: jnp.asarray(x)[None], env_state)
        self._key, key = jax.random.split(self._key)
        history, out = self._act(self.variables, history, batched, np.asarray([last_action], np.int32), env_state, key)
        # The search's answer for people to look at (moozi report draws it): unbatched numpy.
        self.last_search = jax.tree.map(lambda x: np.asarray(x)[0], out)
        return history, int(out.action[0]), float(out.root_value[0])

    def searching_variant(self, **options) -> "Agent":
        """This AlphaZero agent, with the same parameters, searching its game built with other bridge
        options: pgx's go with the komi and length of the OpenSpiel game it plays
        (moozi/play/openspiel_bot.py). Each variant compiles its search once per process."""
        if not self.needs_env_state:
            raise MooziError("only an AlphaZero agent searches with the game's rules; a MuZero agent's model is learned")
        variant = copy.copy(self)
        variant._act = make_acting(self.config, self.spec, self.planner, tuple(sorted(options.items())))
        variant.last_search = None
        return variant

    def play_episode(self, env=None, seed: int = 0) -> float:
        """Plays one episode of a one-player game as `act` plays; returns its return."""
        return self.run_episode(env, seed).episode_return

    def run_episode(self, env=None, seed: int = 0, max_steps: int | None = None) -> "EpisodeOutcome":
        """Plays one episode as `act` plays, cut after `max_steps` actions if it has not ended by then."""
        if env is None:
            env = make_host_env(self.config.game, **env_options(self.config))
        history = self.new_history()
        step = env.reset(seed=seed)
        total, last_action, steps = 0.0, DUMMY_ACTION, 0
        while True:
            total += float(step.reward)
            if step.is_last:
                return EpisodeOutcome(total, steps, cut=False, last_obs=step.obs)
            if max_steps is not None and steps >= max_steps:
                return EpisodeOutcome(total, steps, cut=True, last_obs=step.obs)
            # AlphaZero searches from the game's own state: a JAX-native game behind the host interface
            # (JaxSingleEnv) holds it.
            env_state = env.state if self.needs_env_state else None
            if self.needs_env_state and env_state is None:
                raise MooziError(f"an AlphaZero agent plays {self.config.game} only where the env exposes its "
                                 "JAX state (a pgx or gymnax game built by make_host_env)")
            history, action, _ = self.act(history, step, last_action, env_state)
            step = env.step(action, False)
            last_action = action
            steps += 1

    def as_openspiel_bot(self, player_id: int):
        from moozi.play.openspiel_bot import make_openspiel_bot

        return make_openspiel_bot(self, player_id)


class ActorCriticAgent(Agent):
    """A PPO or IMPALA agent (moozi/actor_critic): acts by sampling its policy, as it was trained and tested
    (a greedy actor-critic can repeat one move forever where the sampled one would not)."""

    def __init__(self, config: Config, params, *, checkpoint: pathlib.Path | None = None):
        self.config = config
        self.spec = env_spec(config)
        self.variables = params
        self.checkpoint = checkpoint
        self.sample = True
        self.simulations = None  # no search
        network = make_actor_critic_learner(config, self.spec).network
        self._act = jax.jit(lambda params, obs, legal, key: act_with_policy(network, params, obs, legal, key))
        self._key = seed_key(config.seed, 99)
        self.last_search = None  # no search

    def new_history(self):
        return None  # the policy sees the current observation only

    @property
    def needs_env_state(self) -> bool:
        return False

    def act(self, history, step: StepOutput, last_action: int, env_state=None):
        self._key, key = jax.random.split(self._key)
        out = self._act(self.variables, np.asarray(step.obs)[None], np.asarray(step.legal_actions)[None], key)
        return history, int(out.action[0]), float(out.value[0])


class EpisodeOutcome(NamedTuple):
    """One evaluation episode of a one-player game."""

    episode_return: float  # the sum of its rewards (so far, if cut)
    steps: int  # actions taken
    cut: bool  # stopped by the step cap before the episode ended
    last_obs: Any = None  # the observation it ended on (2048: the board whose largest tile it reached)


def load_agent(run_dir: str | pathlib.Path, *, checkpoint: str | pathlib.Path | None = None,
               sample: bool = False, simulations: int | None = None) -> Agent:
    """The agent of a run directory, or the agent shipped with the package for a game
    (`load_agent("connect_four")`: moozi.play.shipped; a run directory of that name wins).

    `checkpoint`: None (the default) plays the run's best checkpoint by the in-training test
    (`RUN/checkpoints/BEST`) when it has one, else its latest; "best" or "latest" ask for one
    of them; anything else is the path of a checkpoint directory.
    `sample`: a MuZero or AlphaZero agent acts as the run's training workers do (its planner with
    root noise) instead of greedily; PPO and IMPALA agents always sample their policy.
    `simulations`: the search's simulations per move (MuZero, AlphaZero); None: the run's
    `planner.play_simulations` (greedy) or `planner.num_simulations` (sampled, as in training).
    """
    if simulations is not None and (isinstance(simulations, bool) or not isinstance(simulations, int) or simulations < 1):
        raise MooziError(f"simulations must be a positive integer, got {simulations!r}")
    run_dir = agent_directory(run_dir)
    config = load_saved_config(run_dir / "config.json")
    path = resolve_checkpoint(run_dir, checkpoint)
    spec = env_spec(config)
    if is_actor_critic(config):
        if simulations is not None:
            raise MooziError(f"simulations: a {config.agent} agent plays its policy without a search")
        learner = make_actor_critic_learner(config, spec)
        params = learner.network.init(seed_key(config.seed, 0), example_obs(spec.obs_shape))
        template = {"train": ActorCriticTrainState(params, learner.optimizer.init(params)), "acting_params": params}
        tree, _, _ = load_checkpoint(path, train_state_template=template, expected_meta={"game": spec.name})
        return ActorCriticAgent(config, ActorCriticTrainState(*tree["train"]).params, checkpoint=path)
    network = build_network(config, spec)
    template = init_train_state(network, config.optimizer, seed_key(config.seed, 0), example_stacked_obs(config, spec))
    if _holds_agent_variables(path):  # a shipped agent: the playing network's variables, nothing else
        variables, _, _ = load_checkpoint(path, train_state_template=agent_variables(template),
                                          expected_meta={"game": spec.name, "contents": AGENT_VARIABLES})
    else:
        train_state, _, _ = load_checkpoint(path, train_state_template=template, expected_meta={"game": spec.name})
        variables = agent_variables(train_state, config.train.agent_network)
    return Agent(config, variables, checkpoint=path, sample=sample, simulations=simulations)


def _holds_agent_variables(checkpoint: pathlib.Path) -> bool:
    """Whether a checkpoint's meta.json says it holds the agent's variables only (moozi.play.shipped)."""
    try:
        return json.loads((pathlib.Path(checkpoint) / "meta.json").read_text()).get("contents") == AGENT_VARIABLES
    except (OSError, ValueError, AttributeError):
        return False  # load_checkpoint then names what is wrong with the file


def resolve_checkpoint(run_dir: pathlib.Path, checkpoint: str | pathlib.Path | None) -> pathlib.Path:
    """The checkpoint directory `load_agent` reads (see there); a clear error when there is none."""
    if checkpoint is None or checkpoint == "best":
        path = best_checkpoint(run_dir)
        if path is None and checkpoint == "best":
            raise MooziError(f"{run_dir} has no best checkpoint (it is kept only when the run tests: "
                             "train.test_every_updates > 0)")
        if path is not None:
            return path
        checkpoint = "latest"
    if checkpoint == "latest":
        path = latest_checkpoint(run_dir)
        if path is None:
            raise MooziError(f"{run_dir} has no complete checkpoint yet")
        return path
    return pathlib.Path(checkpoint)
