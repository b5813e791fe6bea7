"""When a Go agent may pass at play time (`planner.play_pass_rule`).

Under Tromp–Taylor area scoring every stone on the board counts as alive, and
two passes in a row end the game. An agent that has learned "pass while the raw
count favours me" wins every game its opponent passes back in, and loses the
game of Go: it passes at move 5 against a program that then keeps playing.
KataGo and Leela Zero avoid this with cleanup phases and ownership targets; at
play time the direct fix is to let the count decide only when it is final.

`"after_opponent_if_ahead"`:

- The agent never passes first. A pass is taken out of the search's legal
  moves until the opponent has just passed.
- Once the opponent has passed, the agent passes, ending the game, exactly
  when it wins on the area count of the board as it stands. Otherwise it plays
  on, choosing among the other moves with its search.
- Moves that would repeat an earlier position (positional superko, which
  OpenSpiel ends as a draw and GTP refuses) are taken out as well. Without
  that, the GTP engine has to answer such a choice with a pass.

A pass stays legal when it is the only legal move, so the rule never leaves
the search without a move. `"search"` (the default) leaves every move to the
search.
"""

from __future__ import annotations

import numpy as np
import pyspiel

from moozi.play.go_rules import BLACK, area_score, board_array, go_parameters, repeats_position
from moozi.core.planner import PASS_RULES
from moozi.envs.base import StepOutput
from moozi.errors import MooziError


def mover_margin(state: pyspiel.State) -> float:
    """The area-count margin of the player to move (positive: it wins if the game ends now)."""
    size, komi = go_parameters(state.get_game())
    score = area_score(board_array(state, size), komi)  # black minus white minus komi
    return score if state.current_player() == BLACK else -score


def apply_pass_rule(rule: str, state: pyspiel.State, step: StepOutput) -> tuple[int | None, StepOutput]:
    """(OpenSpiel action the rule decides, or None; `step` with the moves the rule forbids masked).

    `step.legal_actions` is in moozi's augmented indices (library action + 1).
    """
    if rule == "search":
        return None, step
    if rule != "after_opponent_if_ahead":
        raise MooziError(f"planner.play_pass_rule={rule!r}; allowed: {', '.join(PASS_RULES)}")
    if go_parameters(state.get_game()) is None:
        raise MooziError(
            f"planner.play_pass_rule={rule!r} is a rule of Go; this agent plays {state.get_game().get_type().short_name}"
        )
    pass_action = state.num_distinct_actions() - 1
    history = state.history()
    opponent_passed = bool(history) and history[-1] == pass_action
    if opponent_passed and mover_margin(state) > 0:
        return pass_action, step
    legal = np.array(step.legal_actions, bool, copy=True)
    for action in np.flatnonzero(legal[1:]):
        if repeats_position(state, int(action)):
            legal[action + 1] = False
    if legal[1:pass_action + 1].any():
        legal[pass_action + 1] = False
    elif not legal[pass_action + 1]:
        return pass_action, step  # only repeating stones were left: passing is the one legal move
    return None, step._replace(legal_actions=legal)
