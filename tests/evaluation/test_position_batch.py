"""Batched acting inputs from move lists equal what the OpenSpiel bots feed the agent one position at a time."""

import jax
import numpy as np
import pyspiel
import pytest
from tests.helpers.tiny_connect_four import tiny_config

from moozi.play.openspiel_bot import make_openspiel_bot
from moozi.envs.base import DUMMY_ACTION
from moozi.errors import MooziError
from moozi.core.history import init_history, push_history
from moozi.evaluation.position_batch import PositionBatcher, history_window
from moozi.evaluation.positions import load_positions
from moozi.builders import env_spec

_LABELLED = load_positions().positions
MOVE_LISTS = [[], [3], [3, 2], [0, 6, 1, 6, 2, 5], *(list(p.moves) for p in (_LABELLED[300], _LABELLED[-1]))]


@pytest.mark.parametrize("history_length", [1, 2, 3])
def test_history_window_equals_pushing_every_step(history_length):
    rng = np.random.default_rng(history_length)
    lengths = np.asarray([0, 1, 2, 3, 5, 8])
    frames = rng.random((len(lengths), 9, 2, 3, 4)).astype(np.float32)
    actions = rng.integers(1, 8, size=(len(lengths), 8)).astype(np.int32)
    history, obs, last_action = history_window(frames, actions, lengths, history_length)
    for i, n in enumerate(lengths):
        expected = init_history(1, history_length, (2, 3, 4))
        for t in range(n):
            expected = push_history(expected, frames[i, t][None], np.asarray([t == 0]),
                                    np.asarray([actions[i, t - 1] if t > 0 else DUMMY_ACTION]))
        np.testing.assert_array_equal(history.frames[i], expected.frames[0])
        np.testing.assert_array_equal(history.actions[i], expected.actions[0])
        np.testing.assert_array_equal(obs[i], frames[i, n])
        assert last_action[i] == (actions[i, n - 1] if n > 0 else DUMMY_ACTION)


class _CapturingAgent:
    """Stands in for moozi.Agent: records what the bot passes to `act`, plays the first legal move."""

    def __init__(self, config):
        self.config, self.spec, self.inputs = config, env_spec(config), None

    def new_history(self):
        return init_history(1, self.config.targets.history_length, self.spec.obs_shape)

    def act(self, history, step, last_action, env_state=None):
        self.inputs = (history, step, last_action, env_state)
        return history, int(np.flatnonzero(step.legal_actions)[0]), 0.0


def _bot_inputs(config, moves):
    """The bot's pushed history (what the network reads), step output and env state at `moves`."""
    state = pyspiel.load_game("connect_four").new_initial_state()
    for move in moves:
        state.apply_action(move)
    agent = _CapturingAgent(config)
    make_openspiel_bot(agent, state.current_player()).step(state)
    history, step, last_action, env_state = agent.inputs
    pushed = push_history(history, np.asarray(step.obs)[None], np.asarray([step.is_first]), np.asarray([last_action]))
    return pushed, step, env_state


@pytest.mark.parametrize("agent, history_length", [("muzero", 1), ("muzero", 3), ("alphazero", 1), ("alphazero", 2)])
@pytest.mark.slow
def test_batch_equals_the_openspiel_bots_inputs(agent, history_length):
    config = tiny_config("connect_four", agent=agent, **{"targets.history_length": history_length})
    batch = PositionBatcher(env_spec(config).name, history_length)(MOVE_LISTS)
    pushed = push_history(batch.history, batch.step.obs, batch.step.is_first, batch.last_action)
    assert (batch.env_state is None) == (agent == "muzero")
    for i, moves in enumerate(MOVE_LISTS):
        expected, step, env_state = _bot_inputs(config, moves)
        np.testing.assert_array_equal(np.asarray(pushed.frames[i]), np.asarray(expected.frames[0]))
        np.testing.assert_array_equal(np.asarray(pushed.actions[i]), np.asarray(expected.actions[0]))
        np.testing.assert_array_equal(batch.step.legal_actions[i], np.asarray(step.legal_actions))
        assert batch.step.to_play[i] == step.to_play and not batch.step.is_last[i]
        if env_state is not None:
            for ours, theirs in zip(jax.tree.leaves(batch.env_state), jax.tree.leaves(env_state)):
                np.testing.assert_array_equal(np.asarray(ours)[i], np.asarray(theirs))


@pytest.mark.parametrize("game", ["openspiel:connect_four", "pgx:connect_four"])
@pytest.mark.parametrize("moves", [[0] * 7, [0, 6, 1, 6, 2, 5, 3]])
def test_illegal_or_finished_games_are_refused(game, moves):
    with pytest.raises(MooziError, match="illegal|over"):
        PositionBatcher(game, 1)([[3], moves])


def test_games_without_move_lists_are_refused():
    with pytest.raises(MooziError, match="OpenSpiel game"):
        PositionBatcher("minatar:breakout", 1)
