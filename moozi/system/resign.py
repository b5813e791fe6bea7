"""Resignation in self-play (ELF OpenGo A.4): the rollout worker's bookkeeping around
`moozi.core.resignation`.

Each new episode draws whether resignation is allowed in it; a share
(`train.resign_disabled_fraction`) of episodes is played to the end, and those
episodes calibrate the threshold. A resignation ends the episode at the
current step exactly as a lost game would: the step becomes the last one, the
player who just moved gets reward +1 (rewards belong to the player who just
acted), only the dummy action is legal, and the env is reset on the next step.
"""

from __future__ import annotations

import json

import numpy as np

from moozi.core.resignation import ResignationCalibrator
from moozi.envs.base import DUMMY_ACTION, StepOutput
from moozi.errors import MooziError


class SelfPlayResignation:
    def __init__(self, train_config, spec, num_envs: int, seed: int):
        if not spec.is_two_player:
            raise MooziError(f"train.resign needs a two-player game; {spec.name} has one player")
        self.disabled_fraction = train_config.resign_disabled_fraction
        self.calibrator = ResignationCalibrator(
            target_rate=train_config.resign_false_positive_rate, min_samples=train_config.resign_min_games
        )
        self._rng = np.random.default_rng(seed)
        self.allowed = self._draw(num_envs)
        self.lowest = np.full((num_envs, 2), np.inf)  # lowest v* each player saw this episode
        self.last_mover = np.full(num_envs, -1, np.int32)
        self.resignations = 0
        self.episodes = 0

    def _draw(self, n: int) -> np.ndarray:
        return self._rng.random(n) >= self.disabled_fraction

    def apply(self, step: StepOutput, action: np.ndarray, root_value: np.ndarray) -> tuple[StepOutput, np.ndarray]:
        """Turns this step into a resignation where the player to move gives up; returns (step, action)."""
        live = ~np.asarray(step.is_last)
        to_play = np.asarray(step.to_play)
        rows = np.flatnonzero(live)
        self.lowest[rows, to_play[rows]] = np.minimum(self.lowest[rows, to_play[rows]], root_value[rows])
        # Never on an episode's first step: the episode needs a move before it can end.
        resign = live & ~np.asarray(step.is_first) & self.allowed & (root_value < self.calibrator.threshold)
        if resign.any():
            legal = np.array(step.legal_actions, copy=True)
            legal[resign] = False
            legal[resign, DUMMY_ACTION] = True
            step = step._replace(
                is_last=np.where(resign, True, step.is_last),
                reward=np.where(resign, np.float32(1.0), step.reward).astype(np.asarray(step.reward).dtype),
                legal_actions=legal,
            )
            action = np.where(resign, DUMMY_ACTION, action).astype(np.int32)
            self.resignations += int(resign.sum())
        self._finish(step)
        self.last_mover = np.where(live, to_play, self.last_mover)
        return step, action

    def _finish(self, step: StepOutput) -> None:
        """Calibrates on episodes that ended now and were played without resignation."""
        ended = np.flatnonzero(np.asarray(step.is_last))
        if not len(ended):
            return
        values, lost = [], []
        for b in ended:
            mover = self.last_mover[b]
            if not self.allowed[b] and mover >= 0:
                winner_sign = np.sign(float(step.reward[b]))  # for the player who just moved
                for player in (0, 1):
                    if np.isfinite(self.lowest[b, player]):
                        outcome = winner_sign if player == mover else -winner_sign
                        values.append(self.lowest[b, player])
                        lost.append(outcome < 0)
        if values:
            self.calibrator.add(values, lost)
        self.episodes += len(ended)
        self.lowest[ended] = np.inf
        self.last_mover[ended] = -1
        self.allowed[ended] = self._draw(len(ended))

    def metrics(self) -> dict[str, float]:
        rate = self.calibrator.measured_rate()
        out = {"resign_threshold": float(max(self.calibrator.threshold, -1e9)), "resignations": float(self.resignations)}
        if np.isfinite(rate):
            out["resign_false_positive_rate"] = rate
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        state = {f"calibrator/{k}": v for k, v in self.calibrator.state_dict().items()}
        state.update(allowed=self.allowed.copy(), lowest=self.lowest.copy(), last_mover=self.last_mover.copy(),
                     counters=np.asarray([self.resignations, self.episodes], np.int64),
                     rng=np.frombuffer(json.dumps(self._rng.bit_generator.state).encode(), np.uint8).copy())
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.calibrator.load_state_dict({k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("calibrator/")})
        self.allowed = np.asarray(state["allowed"], bool).copy()
        self.lowest = np.asarray(state["lowest"], np.float64).copy()
        self.last_mover = np.asarray(state["last_mover"], np.int32).copy()
        self.resignations, self.episodes = (int(x) for x in state["counters"])
        self._rng.bit_generator.state = json.loads(bytes(state["rng"]).decode())
