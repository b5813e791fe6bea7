"""Go self-play without early passes (`train.no_pass_before_move`), for the learned-model agent.

Under Tromp–Taylor scoring two passes end the game and every stone counts. A
MuZero agent in self-play finds that "pass while the raw count favours me" wins
whenever its sampled opponent passes back: on go9 its mean game fell from 121
moves to 3.7 within 300 updates, and its data stopped holding any Go. Leela
Zero and KataGo keep self-play games going with rules of this kind; here,
before move N of a game a player may pass only right after its opponent has
passed (answering a pass keeps the game's real ending reachable). From move N
on, passing is free. A pass stays legal where it is the only legal move.

The restriction changes the legal mask the search sees at the root and the
mask stored with the step, nothing else: rewards, the rules and the env are
untouched. AlphaZero mode does not need it: its search sees two passes end
the game with the real score.
"""

from __future__ import annotations

import numpy as np

from moozi.envs.base import EnvSpec, StepOutput
from moozi.errors import MooziError


def is_go(spec: EnvSpec) -> bool:
    return spec.name == "openspiel:go" or spec.name.startswith("openspiel:go(")


class SelfPlayPassRule:
    """The training worker's bookkeeping: moves played in each env's game, and the masked pass."""

    def __init__(self, spec: EnvSpec, num_envs: int, min_moves: int):
        if not is_go(spec):
            raise MooziError(f"train.no_pass_before_move is a rule of Go self-play; this run plays {spec.name}")
        self.min_moves = min_moves
        self.pass_action = spec.num_actions - 1  # OpenSpiel's pass is its last action
        self.moves = np.zeros(num_envs, np.int64)  # moves played before the current step of each game

    def restrict(self, step: StepOutput, last_action: np.ndarray) -> StepOutput:
        """`step` with the pass masked where the rule forbids it (call once per step, before acting)."""
        is_first, is_last = np.asarray(step.is_first), np.asarray(step.is_last)
        self.moves = np.where(is_first, 0, self.moves)
        opponent_passed = ~is_first & (np.asarray(last_action) == self.pass_action)
        legal = np.asarray(step.legal_actions)
        stones_legal = legal[:, 1:self.pass_action].any(axis=1)
        blocked = (self.moves < self.min_moves) & ~opponent_passed & ~is_last & stones_legal & legal[:, self.pass_action]
        self.moves = self.moves + ~is_last  # this step's move, played after acting
        if not blocked.any():
            return step
        legal = legal.copy()
        legal[blocked, self.pass_action] = False
        return step._replace(legal_actions=legal)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"moves": self.moves.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.moves = np.asarray(state["moves"], np.int64).copy()
