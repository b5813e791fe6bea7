"""Go's play-time pass rule (`planner.play_pass_rule`), on real OpenSpiel go positions."""

from __future__ import annotations

import numpy as np
import pyspiel
import pytest

from moozi.play.openspiel_bot import MooziBot
from moozi.play.pass_rule import apply_pass_rule, mover_margin
from moozi.envs.openspiel import OpenSpielEnv
from moozi.errors import MooziError
from moozi.core.history import init_history
from tests.helpers.tiny import tiny_config

GO = "go(board_size=9,komi=7.5)"
PASS = 81  # OpenSpiel's pass on 9x9


class _PassingAgent:
    """Passes whenever a pass is legal, else plays the first legal stone: an agent that learned to pass."""

    def __init__(self, rule: str):
        self.config = tiny_config(**{"planner.play_pass_rule": rule})
        self.spec = OpenSpielEnv(GO).spec
        self.offered = []

    def new_history(self):
        return init_history(1, self.config.targets.history_length, self.spec.obs_shape)

    def act(self, history, step, last_action, env_state=None):
        legal = np.asarray(step.legal_actions)
        self.offered.append(legal.copy())
        return history, (PASS + 1 if legal[PASS + 1] else int(np.flatnonzero(legal)[0])), 0.0


def _state(*moves):
    state = pyspiel.load_game(GO).new_initial_state()
    for move in moves:
        state.apply_action(move)
    return state


def _move(rule, state):
    agent = _PassingAgent(rule)
    return MooziBot(agent, state.current_player()).step(state), agent


def test_without_the_rule_the_agent_passes_first():
    move, _ = _move("search", _state())
    assert move == PASS


def test_the_agent_never_passes_first():
    for moves in [(), (40,), (40, 41, 30)]:
        move, agent = _move("after_opponent_if_ahead", _state(*moves))
        assert move != PASS
        assert not agent.offered[-1][PASS + 1] and agent.offered[-1][1:PASS + 1].any()


def test_after_the_opponents_pass_it_passes_when_the_count_wins():
    # Black's lone centre stone owns the whole board: 81 - 7.5 for black.
    state = _state(40, PASS)
    assert mover_margin(state) == 73.5
    move, agent = _move("after_opponent_if_ahead", state)
    assert move == PASS and agent.offered == []  # decided by the count, not the search
    # White to move after black's pass on the empty board: komi alone wins it for white.
    state = _state(PASS)
    assert mover_margin(state) == 7.5
    assert _move("after_opponent_if_ahead", state)[0] == PASS


def test_after_the_opponents_pass_it_plays_on_when_the_count_loses():
    # White's stone at the centre and black's at 30 share the board: black 1 - 1 - 7.5 = -7.5.
    state = _state(PASS, 40, 30, PASS)
    assert state.current_player() == 0 and mover_margin(state) == -7.5
    move, agent = _move("after_opponent_if_ahead", state)
    assert move != PASS and move in state.legal_actions()
    assert not agent.offered[-1][PASS + 1]


def test_a_pass_stays_when_it_is_the_only_legal_move():
    state = _state(40)
    step = OpenSpielEnv(GO).step_output_at(state)
    only_pass = np.zeros_like(step.legal_actions)
    only_pass[PASS + 1] = True
    decided, ruled = apply_pass_rule("after_opponent_if_ahead", state, step._replace(legal_actions=only_pass))
    assert decided is None and np.array_equal(ruled.legal_actions, only_pass)


def test_the_rule_is_refused_outside_go_and_for_unknown_names():
    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    step = OpenSpielEnv("tic_tac_toe").step_output_at(state)
    with pytest.raises(MooziError, match="a rule of Go"):
        apply_pass_rule("after_opponent_if_ahead", state, step)
    with pytest.raises(MooziError, match="planner.play_pass_rule: expected one of .search., .after_opponent_if_ahead."):
        tiny_config(**{"planner.play_pass_rule": "never"})
