"""The OpenSpiel bot feeds the network exactly what a training rollout worker would have fed it."""

from __future__ import annotations

import numpy as np
import pyspiel
import pytest

from moozi.play.openspiel_bot import MooziBot
from moozi.envs.openspiel import OpenSpielEnv
from moozi.core.history import history_input, init_history, push_history
from tests.helpers.tiny import tiny_config

MOVES = [4, 0, 8, 2, 1, 7, 6]  # tic-tac-toe cells; no line is completed before the last move


class _SpyAgent:
    """Records the network input `act` would build, and answers with the first legal move."""

    def __init__(self, history_length: int):
        self.config = tiny_config(**{"targets.history_length": history_length})
        self.spec = OpenSpielEnv("tic_tac_toe").spec
        self.inputs = []

    def new_history(self):
        return init_history(1, self.config.targets.history_length, self.spec.obs_shape)

    def act(self, history, step, last_action, env_state=None):
        history = push_history(history, np.asarray(step.obs)[None], np.asarray([step.is_first]),
                               np.asarray([last_action], np.int32))
        self.inputs.append(np.asarray(history_input(history, self.spec.num_actions))[0])
        return history, int(np.flatnonzero(step.legal_actions)[0]), 0.0


def _training_worker_inputs(history_length: int) -> list[np.ndarray]:
    """The stacked input at every step of the game, built as a rollout worker builds it."""
    env = OpenSpielEnv("tic_tac_toe")
    history = init_history(1, history_length, env.spec.obs_shape)
    out, last_action, inputs = env.reset(), 0, []
    for move in MOVES:
        history = push_history(history, out.obs[None], np.asarray([out.is_first]), np.asarray([last_action]))
        inputs.append(np.asarray(history_input(history, env.spec.num_actions))[0])
        out = env.step(move + 1, out.is_last)
        last_action = move + 1
    return inputs


@pytest.mark.parametrize("history_length", [1, 2, 3, 8])
def test_bot_input_equals_the_training_workers_at_every_history_length(history_length):
    expected = _training_worker_inputs(history_length)
    game = pyspiel.load_game("tic_tac_toe")
    for ply in range(len(MOVES)):
        state = game.new_initial_state()
        for move in MOVES[:ply]:
            state.apply_action(move)
        agent = _SpyAgent(history_length)
        MooziBot(agent, state.current_player()).step(state)
        np.testing.assert_array_equal(agent.inputs[-1], expected[ply], err_msg=f"ply {ply}")


def test_an_opponents_pass_in_go_reaches_the_network_as_the_last_action():
    """go9 agents must see the opponent's pass (they learned to pass early when every evaluated
    position carried the dummy action instead)."""
    game = pyspiel.load_game("go(board_size=9,komi=7.5)")
    state = game.new_initial_state()
    state.apply_action(40)  # black takes the centre
    state.apply_action(game.num_distinct_actions() - 1)  # white passes
    agent = _SpyAgent(1)
    agent.spec = OpenSpielEnv("go(board_size=9,komi=7.5)").spec
    recorded = []
    original = agent.act
    agent.act = lambda history, step, last_action, env_state=None: (recorded.append(last_action),
                                                                     original(history, step, last_action))[1]
    MooziBot(agent, 0).step(state)
    assert recorded == [game.num_distinct_actions()]  # the pass, as an augmented index (library index + 1)
