"""Resignation in self-play with a calibrated threshold (ELF OpenGo A.4; AlphaGo Zero).

A player resigns when its root value v* falls below a threshold. The threshold
is chosen from games played to the end without resignation (a configurable
share of self-play games): for each player of such a game we keep the lowest
v* it saw and whether it went on to lose. Resigning at threshold tau would have
ended the game for that player exactly when its lowest v* < tau; the
resignation is a false positive when that player did not lose (a win or a draw
given away). The false-positive rate at tau is

    FP(tau) = #{no loss and v_min < tau} / #{v_min < tau},

the share of would-be resignations that were wrong (AlphaGo Zero's "games that
could have been won"). The calibrated threshold is the largest tau with
FP(tau) <= target, so resignation is as eager as the target allows.

`ResignationCalibrator` keeps those statistics and the threshold;
`SelfPlayResignation` is the rollout worker's bookkeeping around it. Each new
episode draws whether resignation is allowed in it; a share
(`train.resign_disabled_fraction`) of episodes is played to the end, and those
episodes calibrate the threshold. A resignation ends the episode at the
current step exactly as a lost game would: the step becomes the last one, the
player who just moved gets reward +1 (rewards belong to the player who just
acted), only the dummy action is legal, and the env is reset on the next step.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from moozi.envs.base import DUMMY_ACTION, StepOutput
from moozi.core.types import sub_state
from moozi.errors import MooziError

NEVER = -np.inf  # the threshold before enough games were seen: nobody resigns


def false_positive_rate(min_values: np.ndarray, lost: np.ndarray, threshold: float) -> float:
    """FP(threshold) over player-games (nan when nobody would have resigned)."""
    would_resign = np.asarray(min_values) < threshold
    if not would_resign.any():
        return float("nan")
    return float(np.mean(~np.asarray(lost, bool)[would_resign]))


def calibrate_threshold(min_values: np.ndarray, lost: np.ndarray, target_rate: float) -> float:
    """The largest threshold whose false-positive rate is at most `target_rate` (NEVER if none).

    Candidate thresholds lie just above each observed v_min: raising tau past a
    player-game's v_min adds it to the would-resign set, so FP only changes there.
    """
    min_values = np.asarray(min_values, np.float64)
    lost = np.asarray(lost, bool)
    if min_values.size == 0:
        return NEVER
    order = np.argsort(min_values, kind="stable")
    sorted_values, sorted_lost = min_values[order], lost[order]
    # With tau just above sorted_values[i] (and below the next distinct value), the first i+1 resign.
    wrong = np.cumsum(~sorted_lost)
    count = np.arange(1, len(sorted_values) + 1)
    rate = wrong / count
    distinct_end = np.r_[sorted_values[1:] != sorted_values[:-1], True]  # last index of each value
    ok = (rate <= target_rate) & distinct_end
    if not ok.any():
        return NEVER
    i = int(np.flatnonzero(ok)[-1])
    upper = sorted_values[i + 1] if i + 1 < len(sorted_values) else sorted_values[i] + 1e-6
    return float(0.5 * (sorted_values[i] + upper))


@dataclasses.dataclass
class ResignationCalibrator:
    """Keeps the last `window` player-games played without resignation and the current threshold."""

    target_rate: float = 0.05
    window: int = 1000
    min_samples: int = 100

    def __post_init__(self):
        self.min_values = np.zeros((0,), np.float64)
        self.lost = np.zeros((0,), bool)
        self.threshold = NEVER

    def add(self, min_values, lost) -> None:
        """Adds player-games (lowest v* seen, whether that player lost) and recalibrates."""
        self.min_values = np.r_[self.min_values, np.asarray(min_values, np.float64)][-self.window:]
        self.lost = np.r_[self.lost, np.asarray(lost, bool)][-self.window:]
        if len(self.min_values) >= self.min_samples:
            self.threshold = calibrate_threshold(self.min_values, self.lost, self.target_rate)

    def measured_rate(self) -> float:
        """FP of the current threshold on the kept games (nan when it would trigger on none)."""
        return false_positive_rate(self.min_values, self.lost, self.threshold)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"min_values": self.min_values.copy(), "lost": self.lost.copy(),
                "threshold": np.asarray(self.threshold, np.float64)}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.min_values = np.asarray(state["min_values"], np.float64)
        self.lost = np.asarray(state["lost"], bool)
        self.threshold = float(state["threshold"])


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
        self.calibrator.load_state_dict(sub_state(state, "calibrator/"))
        self.allowed = np.asarray(state["allowed"], bool).copy()
        self.lowest = np.asarray(state["lowest"], np.float64).copy()
        self.last_mover = np.asarray(state["last_mover"], np.int32).copy()
        self.resignations, self.episodes = (int(x) for x in state["counters"])
        self._rng.bit_generator.state = json.loads(bytes(state["rng"]).decode())
