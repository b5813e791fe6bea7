"""A moozi Agent as a `pyspiel.Bot`, so any OpenSpiel tool can play against it."""

from __future__ import annotations

import jax
import numpy as np
import pyspiel

from moozi.envs.base import DUMMY_ACTION
from moozi.envs.openspiel import OpenSpielEnv
from moozi.errors import MooziError
from moozi.history import push_history

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
        decisions = self._decision_points(state)  # [(state, augmented action taken there)]
        start = max(0, len(decisions) - length)
        history = agent.new_history()
        last_action = DUMMY_ACTION
        for k in range(start, len(decisions) - 1):
            past, action_taken = decisions[k]
            step = self._env.step_output_at(past)
            history = _push(
                history,
                np.asarray(step.obs)[None],
                np.asarray([k == 0]),
                np.asarray([last_action], np.int32),
            )
            last_action = action_taken
        step = self._env.step_output_at(state)
        if len(decisions) == 1:
            step = step._replace(is_first=np.bool_(True))
        _, action, _ = agent.act(history, step, last_action)
        if action == DUMMY_ACTION or not step.legal_actions[action]:
            raise MooziError(f"the agent chose an illegal action {action} at {state.history_str()}")
        return action - 1

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


def make_openspiel_bot(agent, player_id: int) -> MooziBot:
    if not agent.spec.name.startswith("openspiel:"):
        raise MooziError(f"as_openspiel_bot needs an OpenSpiel game; this agent plays {agent.spec.name}")
    return MooziBot(agent, player_id)
