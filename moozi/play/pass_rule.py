"""When a Go agent may pass at play time (`planner.play_pass_rule`).

Under Tromp–Taylor area scoring every stone on the board counts as alive, and
two passes in a row end the game. An agent that has learned "pass while the raw
count favours me" wins every game its opponent passes back in, and loses the
game of Go: it passes at move 5 against a program that then keeps playing.
KataGo and Leela Zero avoid this with cleanup phases and ownership targets; at
play time the direct fix is to let the count decide only when it is final.

`"no_eye_fill"` (the go9 preset's), the way a Go player ends a game:

- The agent never fills one of its own single-point eyes (an empty point whose
  every on-board neighbour is its own stone, `go_rules.own_eyes`): those moves
  are taken out of the search's legal moves at all times. A group that fills
  its last two eyes dies, and nothing is gained by filling one.
- It never passes first while a useful move remains: the pass is taken out
  until the opponent has just passed, unless every remaining stone fills an
  own eye or repeats a position; then it passes.
- After the opponent's pass it passes, ending the game, when it wins on the
  area count of the board as it stands; otherwise it plays on with its search
  among the remaining moves, and passes once none is left.

`"after_opponent_if_ahead"` (the older rule, kept for runs that name it): the
same without the eyes. Once the opponent passes with the agent behind, the
agent must place stones until every empty point is suicide, so it fills its
own eyes and its groups die: every game it played against GNU Go ended at the
zero-area floor (−88.5 as black, −73.5 as white).

Both take out moves that would repeat an earlier position (positional
superko, which OpenSpiel ends as a draw and GTP refuses): without that, the
GTP engine has to answer such a choice with a pass. `"search"` (the default)
leaves every move to the search.
"""

from __future__ import annotations

import numpy as np
import pyspiel

from moozi.play.go_rules import BLACK, area_score, board_array, go_parameters, own_eyes, repeats_position
from moozi.core.planner import PASS_RULES
from moozi.envs.base import StepOutput
from moozi.errors import MooziError


def mover_margin(state: pyspiel.State) -> float:
    """The area-count margin of the player to move (positive: it wins if the game ends now)."""
    size, komi = go_parameters(state.get_game())
    score = area_score(board_array(state, size), komi)  # black minus white minus komi
    return score if state.current_player() == BLACK else -score


def mover_eyes(state: pyspiel.State) -> np.ndarray:
    """[N * N] bool over the board's actions: the single-point eyes of the player to move."""
    size, _ = go_parameters(state.get_game())
    sign = 1 if state.current_player() == BLACK else -1
    return own_eyes(board_array(state, size), sign).ravel()  # row-major from A1: OpenSpiel's action order


def apply_pass_rule(rule: str, state: pyspiel.State, step: StepOutput) -> tuple[int | None, StepOutput]:
    """(OpenSpiel action the rule decides, or None; `step` with the moves the rule forbids masked).

    `step.legal_actions` is in moozi's augmented indices (library action + 1).
    """
    if rule == "search":
        return None, step
    if rule not in PASS_RULES:
        raise MooziError(f"planner.play_pass_rule={rule!r}; allowed: {', '.join(PASS_RULES)}")
    if go_parameters(state.get_game()) is None:
        raise MooziError(
            f"planner.play_pass_rule={rule!r} is a rule of Go; this agent plays {state.get_game().get_type().short_name}"
        )
    pass_action = state.num_distinct_actions() - 1
    history = state.history()
    opponent_passed = bool(history) and history[-1] == pass_action
    if rule == "after_opponent_if_ahead" and opponent_passed and mover_margin(state) > 0:
        return pass_action, step
    legal = np.array(step.legal_actions, bool, copy=True)
    for action in np.flatnonzero(legal[1:pass_action + 1]):
        if repeats_position(state, int(action)):
            legal[action + 1] = False
    if rule == "no_eye_fill":
        legal[1:pass_action + 1] &= ~mover_eyes(state)
        if not legal[1:pass_action + 1].any() or (opponent_passed and mover_margin(state) > 0):
            return pass_action, step
        legal[pass_action + 1] = False
        return None, step._replace(legal_actions=legal)
    if legal[1:pass_action + 1].any():
        legal[pass_action + 1] = False
    elif not legal[pass_action + 1]:
        return pass_action, step  # only repeating stones were left: passing is the one legal move
    return None, step._replace(legal_actions=legal)
