"""Resignation with a calibrated threshold (ELF OpenGo A.4; AlphaGo Zero).

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
"""

from __future__ import annotations

import dataclasses

import numpy as np

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
