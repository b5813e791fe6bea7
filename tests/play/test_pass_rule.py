"""Go's play-time pass rule (`planner.play_pass_rule`), on real OpenSpiel go positions."""

from __future__ import annotations

import numpy as np
import pyspiel
import pytest

from moozi.play.openspiel_bot import MooziBot
from moozi.play.go_rules import own_eyes
from moozi.play.pass_rule import apply_pass_rule, mover_margin
from moozi.envs.openspiel import OpenSpielEnv
from moozi.errors import MooziError
from moozi.core.history import init_history
from tests.helpers.tiny import tiny_config

GO = "go(board_size=9,komi=7.5)"
PASS = 81  # OpenSpiel's pass on 9x9


class _PassingAgent:
    """Passes whenever a pass is legal, else plays the first legal stone: an agent that learned to pass."""

    def __init__(self, rule: str, game: str = GO):
        self.config = tiny_config(**{"planner.play_pass_rule": rule})
        self.spec = OpenSpielEnv(game).spec
        self.pass_index = self.spec.num_actions - 1  # augmented: the library's pass + 1
        self.offered = []

    def new_history(self):
        return init_history(1, self.config.targets.history_length, self.spec.obs_shape)

    def act(self, history, step, last_action, env_state=None):
        legal = np.asarray(step.legal_actions)
        self.offered.append(legal.copy())
        return history, (self.pass_index if legal[self.pass_index] else int(np.flatnonzero(legal)[0])), 0.0


def _state(*moves, game=GO):
    state = pyspiel.load_game(game).new_initial_state()
    for move in moves:
        state.apply_action(move)
    return state


def _move(rule, state):
    agent = _PassingAgent(rule, str(state.get_game()))
    return MooziBot(agent, state.current_player()).step(state), agent


def test_without_the_rule_the_agent_passes_first():
    move, _ = _move("search", _state())
    assert move == PASS


@pytest.mark.parametrize("rule", ["after_opponent_if_ahead", "no_eye_fill"])
def test_the_agent_never_passes_first(rule):
    for moves in [(), (40,), (40, 41, 30)]:
        move, agent = _move(rule, _state(*moves))
        assert move != PASS
        assert not agent.offered[-1][PASS + 1] and agent.offered[-1][1:PASS + 1].any()


@pytest.mark.parametrize("rule", ["after_opponent_if_ahead", "no_eye_fill"])
def test_after_the_opponents_pass_it_passes_when_the_count_wins(rule):
    # Black's lone centre stone owns the whole board: 81 - 7.5 for black.
    state = _state(40, PASS)
    assert mover_margin(state) == 73.5
    move, agent = _move(rule, state)
    assert move == PASS and agent.offered == []  # decided by the count, not the search
    # White to move after black's pass on the empty board: komi alone wins it for white.
    state = _state(PASS)
    assert mover_margin(state) == 7.5
    assert _move(rule, state)[0] == PASS


@pytest.mark.parametrize("rule", ["after_opponent_if_ahead", "no_eye_fill"])
def test_after_the_opponents_pass_it_plays_on_when_the_count_loses(rule):
    # White's stone at the centre and black's at 30 share the board: black 1 - 1 - 7.5 = -7.5.
    state = _state(PASS, 40, 30, PASS)
    assert state.current_player() == 0 and mover_margin(state) == -7.5
    move, agent = _move(rule, state)
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
    with pytest.raises(MooziError, match="planner.play_pass_rule: expected one of .search., .after_opponent_if_ahead., .no_eye_fill."):
        tiny_config(**{"planner.play_pass_rule": "never"})


# ------------------------------------------------------------------ no_eye_fill
A1, B1, C1, A2, B2 = 0, 1, 2, 9, 10  # 9x9 actions: row * 9 + column from the bottom left


def test_own_eyes_are_empty_points_surrounded_by_one_colour_on_the_board():
    board = np.zeros((5, 5), np.int8)
    board[0, 1] = board[1, 0] = 1  # black around the corner A1
    board[1, 2] = board[0, 3] = board[2, 3] = board[1, 4] = 1  # black around D2 (and so around the corner E1)
    board[0, 2] = -1  # white beside C1: C1 is nobody's eye
    eyes = own_eyes(board, 1)
    assert [(int(r), int(c)) for r, c in zip(*np.nonzero(eyes))] == [(0, 0), (0, 4), (1, 3)]
    assert not own_eyes(board, -1).any()
    assert not own_eyes(np.zeros((5, 5), np.int8), 1).any()


def test_false_eyes_are_not_eyes():
    """Two opponent diagonals in the middle of the board, or one on the edge, make an eye false: it may
    have to be filled to connect, so the rule leaves it to the search."""
    board = np.zeros((5, 5), np.int8)
    for point in ((1, 2), (3, 2), (2, 1), (2, 3)):
        board[point] = 1  # black around C3
    board[1, 1] = -1
    assert own_eyes(board, 1)[2, 2]  # one white diagonal: still an eye
    board[3, 3] = -1
    assert not own_eyes(board, 1)[2, 2]  # two: false
    edge = np.zeros((5, 5), np.int8)
    edge[0, 1] = edge[0, 3] = edge[1, 2] = 1  # black around C1 on the edge
    assert own_eyes(edge, 1)[0, 2]
    edge[1, 1] = -1
    assert not own_eyes(edge, 1)[0, 2]  # one white diagonal on the edge: false


def test_no_eye_fill_never_offers_an_own_eye_while_the_game_goes_on():
    # Black B1 and A2 make A1 black's eye; white played last (not a pass).
    state = _state(B1, 40, A2, 50)
    move, agent = _move("no_eye_fill", state)
    offered = agent.offered[-1]
    assert not offered[A1 + 1] and not offered[PASS + 1]
    assert offered[C1 + 1] and move == C1  # the passing agent's first legal stone, A1 skipped
    # The older rule offers the eye (and this agent, which takes the first legal stone, fills it).
    assert _move("after_opponent_if_ahead", state)[0] == A1


def test_no_eye_fill_keeps_an_opponents_eye_point_that_captures():
    # White's lone stone at A1 in atari from black B1: black's A2 captures it; A2 is no black eye.
    state = _state(B1, A1)
    _, agent = _move("no_eye_fill", state)
    assert agent.offered[-1][A2 + 1]


# A 5x5 board where each side has a group with two single-point eyes and no empty point but those
# four: black rows 1-3 less its eyes A1, C1; white rows 4-5 less its eyes A5, C5. Black 13 + 2,
# white 8 + 2, komi 7.5: black is behind by 2.5.
SMALL = "go(board_size=5,komi=7.5)"
_BLACK = [1, 3, 4, *range(5, 15)]
_WHITE = [*range(15, 20), 21, 23, 24]
_SMALL_PASS = 25


def _two_eyed_groups(white_passes_last: bool):
    """Black's stones, the first ones answered by white passes, then pairs; white's last move is
    its last stone, or (white_passes_last) a pass after black's last stone."""
    moves, black = [], list(_BLACK)
    for _ in range(len(_BLACK) - len(_WHITE) - white_passes_last):
        moves += [black.pop(0), _SMALL_PASS]
    for b, w in zip(black, _WHITE):
        moves += [b, w]
    if white_passes_last:
        moves += [black[-1], _SMALL_PASS]
    state = _state(*moves, game=SMALL)
    assert state.current_player() == 0 and mover_margin(state) == -2.5
    assert sorted(state.legal_actions()) == [0, 2, _SMALL_PASS]  # its eyes (the others are suicide) and the pass
    return state


@pytest.mark.parametrize("white_passes_last", [False, True])
def test_no_eye_fill_passes_when_only_its_own_eyes_are_left(white_passes_last):
    state = _two_eyed_groups(white_passes_last)
    move, agent = _move("no_eye_fill", state)
    assert move == _SMALL_PASS and agent.offered == []  # decided by the rule, behind or not
    # The older rule fills an eye: its pass is not offered while a stone is legal.
    move, agent = _move("after_opponent_if_ahead", state)
    assert move in (0, 2) and not agent.offered[-1][_SMALL_PASS + 1]


def test_no_eye_fill_takes_out_repeating_stones_and_passes_when_none_is_left():
    state = _state(40)
    env = OpenSpielEnv(GO)
    step = env.step_output_at(state)
    only_c1 = np.zeros_like(step.legal_actions)
    only_c1[[C1 + 1, PASS + 1]] = True
    decided, ruled = apply_pass_rule("no_eye_fill", state, step._replace(legal_actions=only_c1))
    assert decided is None and np.flatnonzero(ruled.legal_actions).tolist() == [C1 + 1]
    only_pass = np.zeros_like(step.legal_actions)
    only_pass[PASS + 1] = True
    decided, _ = apply_pass_rule("no_eye_fill", state, step._replace(legal_actions=only_pass))
    assert decided == PASS
