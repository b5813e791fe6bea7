"""A moozi Agent as a `pyspiel.Bot`, so any OpenSpiel tool can play against it."""

from __future__ import annotations

import functools
import jax
import jax.numpy as jnp
import numpy as np
import pyspiel

from moozi.builders import env_options
from moozi.play.go_rules import go_parameters
from moozi.play.pass_rule import apply_pass_rule
from moozi.envs.base import DUMMY_ACTION
from moozi.envs.openspiel import OpenSpielEnv
from moozi.envs.registry import make_env
from moozi.envs.twins import openspiel_twin
from moozi.errors import MooziError
from moozi.core.history import push_history

_push = jax.jit(push_history)


class MooziBot(pyspiel.Bot):
    """Plays `player_id` with the agent's greedy search; stateless between calls.

    The history input (thesis 5.2.6) is rebuilt from the state's own action
    history, so the bot can join a game at any point (restart_at is free).
    """

    def __init__(self, agent, player_id: int):
        pyspiel.Bot.__init__(self)
        self._agent = agent
        self._player_id = player_id
        game_name = agent.spec.name.split(":", 1)[1]
        self._env = OpenSpielEnv(game_name)

    def restart_at(self, state) -> None:
        pass

    def inform_action(self, state, player_id, action) -> None:
        pass

    def step(self, state) -> int:
        if state.current_player() != self._player_id:
            raise MooziError(f"MooziBot for player {self._player_id} asked to move for player {state.current_player()}")
        agent = self._agent
        length = agent.config.targets.history_length
        steps, env_state = self._steps(state)  # [(step output, augmented action taken there)]
        start = max(0, len(steps) - length)
        history = agent.new_history()
        # a_{k-1} for the first step pushed here: the action taken before it, or the dummy at the
        # start of the game. With history length 1 the loop below pushes nothing, and this is the
        # action that led to the current state, which `act` pushes with it.
        last_action = steps[start - 1][1] if start > 0 else DUMMY_ACTION
        for k in range(start, len(steps) - 1):
            past, action_taken = steps[k]
            history = _push(
                history,
                np.asarray(past.obs)[None],
                np.asarray([k == 0]),
                np.asarray([last_action], np.int32),
            )
            last_action = action_taken
        step = steps[-1][0]
        if len(steps) == 1:
            step = step._replace(is_first=np.bool_(True))
        decided, step = apply_pass_rule(agent.config.planner.play_pass_rule, state, step)
        if decided is not None:
            return decided
        _, action, _ = agent.act(history, step, last_action, env_state)
        if action == DUMMY_ACTION or not step.legal_actions[action]:
            raise MooziError(f"the agent chose an illegal action {action} at {state.history_str()}")
        return action - 1

    def _steps(self, state):
        """The env output at every decision point from the start up to `state`, with the action
        taken at each (the dummy at `state`), and the env state at `state` (None: not needed)."""
        return [(self._env.step_output_at(past), action) for past, action in self._decision_points(state)], None

    def _decision_points(self, state):
        """Every non-chance state from the start up to `state`, with the action taken at each."""
        game = state.get_game()
        current = game.new_initial_state()
        points = []
        for item in state.full_history():
            if not current.is_chance_node():
                points.append((current.clone(), item.action + 1))
            current.apply_action(item.action)
        points.append((current, DUMMY_ACTION))
        return points


def twin_options(agent, game: pyspiel.Game) -> dict:
    """The pgx bridge options that make the agent's twin play `game`'s rules: for go, its komi and length
    (pgx fixes both per env, OpenSpiel per game, and a GTP controller sets komi); {} where `game` is the
    twin the run trained on. pgx's game must last at least as long as OpenSpiel's, or the replay of a
    long game would end in pgx first."""
    params = go_parameters(game)
    if params is None:
        return {}
    if (params[1], game.max_game_length()) == _trained_rules(agent.spec.name):
        return {}
    return {"komi": params[1], "max_terminal_steps": game.max_game_length()}


@functools.lru_cache(maxsize=None)
def _trained_rules(pgx_name: str) -> tuple[float, int]:
    """(komi, length) of the OpenSpiel go whose twin a run trained on (the twins agree on both)."""
    game = pyspiel.load_game(openspiel_twin(pgx_name).split(":", 1)[1])
    return go_parameters(game)[1], game.max_game_length()


def twin_env(agent, game: pyspiel.Game):
    """The agent's pgx twin (with the run's env options) under `game`'s rules (`twin_options`)."""
    return make_env(agent.spec.name, **env_options(agent.config), **twin_options(agent, game))


class PgxTwinBot(MooziBot):
    """An agent trained on the pgx twin of an OpenSpiel game (AlphaZero mode) playing the OpenSpiel game.

    The OpenSpiel action history is replayed in pgx (the twins share action ids,
    moozi/envs/twins.py), so the agent sees pgx's observations and, for
    AlphaZero, searches from the replayed pgx state. For go the twin takes the
    komi and length of the game being played (`twin_options`), and so does the
    search's copy of the rules: one env and one compiled search per variant.
    """

    def __init__(self, agent, player_id: int):
        pyspiel.Bot.__init__(self)
        self._trained = agent
        self._agent = agent
        self._player_id = player_id
        self._variants: dict[tuple, tuple] = {}  # twin options -> (jitted init, jitted step, agent)

    def step(self, state) -> int:
        options = twin_options(self._trained, state.get_game())
        key = tuple(sorted(options.items()))
        if key not in self._variants:
            env = twin_env(self._trained, state.get_game())
            agent = self._trained
            if options and agent.needs_env_state:
                agent = agent.searching_variant(**options)  # AlphaZero: its search steps the same rules
            self._variants[key] = (jax.jit(env.init), jax.jit(env.step), agent)
        self._init, self._step, self._agent = self._variants[key]
        return super().step(state)

    def _steps(self, state):
        if any(item.player == pyspiel.PlayerId.CHANCE for item in state.full_history()):
            raise MooziError("replaying in a pgx twin needs a game without chance moves")
        env_state, out = self._init(jax.random.PRNGKey(0))
        steps = []
        for action in state.history():
            steps.append((jax.device_get(out), action + 1))
            env_state, out = self._step(env_state, jnp.int32(action + 1), jnp.bool_(False), jax.random.PRNGKey(0))
        steps.append((jax.device_get(out), DUMMY_ACTION))
        return steps, env_state


def make_openspiel_bot(agent, player_id: int) -> MooziBot:
    if openspiel_twin(agent.spec.name) is not None:
        return PgxTwinBot(agent, player_id)
    if not agent.spec.name.startswith("openspiel:"):
        raise MooziError(f"as_openspiel_bot needs an OpenSpiel game (or a pgx twin of one); this agent plays {agent.spec.name}")
    return MooziBot(agent, player_id)
