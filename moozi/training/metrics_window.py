"""What every driver logs between two log lines (`MetricsWindow`) and the progress line it prints
(`print_progress`)."""

from __future__ import annotations

import math
import sys
import time

from moozi.training.counters import Counters


class MetricsWindow:
    """Sums of metrics between two log lines (throughput, waits, losses). Its state goes into each
    checkpoint (`state`), so a resumed run logs the same averages."""

    def __init__(self):
        self.start = time.perf_counter()
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.updates = 0
        self.iterations = 0
        self.env_steps = 0

    def state(self) -> dict:
        return {
            "sums": self.sums,
            "counts": self.counts,
            "updates": self.updates,
            "iterations": self.iterations,
            "env_steps": self.env_steps,
        }

    @classmethod
    def from_state(cls, state: dict | None) -> "MetricsWindow":
        window = cls()
        if state:
            window.sums = {k: float(v) for k, v in state["sums"].items()}
            window.counts = {k: int(v) for k, v in state["counts"].items()}
            window.updates, window.iterations, window.env_steps = state["updates"], state["iterations"], state["env_steps"]
        return window

    def add(self, key: str, value: float, count: int = 1) -> None:
        self.sums[key] = self.sums.get(key, 0.0) + float(value)
        self.counts[key] = self.counts.get(key, 0) + count
        if key == "iteration_seconds":
            self.iterations += 1

    def add_metrics(self, metrics: dict, count: int) -> None:
        """A learner's update of `count` steps: its metrics (means over those steps) weigh `count` each."""
        self.updates += count
        for key, value in metrics.items():
            self.add(key, value * count, count)

    def add_rollout(self, result) -> None:
        """A training rollout worker's `RolloutResult` (its env steps and episodes go to the counters)."""
        self.env_steps += result.env_steps
        for key, value in result.metrics.items():
            if key in ("env_steps", "episodes"):
                continue
            self.add(key, value)

    def add_iteration(self, metrics: dict, env_steps: int, updates: int) -> None:
        """One iteration of the actor-critic loop: its env steps and updates, and each finite metric
        once (its episodes go to the counters)."""
        self.env_steps += env_steps
        self.updates += updates
        for key, value in metrics.items():
            if key != "episodes" and math.isfinite(value):
                self.add(key, value)

    def mean(self, key: str) -> float | None:
        return self.sums[key] / self.counts[key] if self.counts.get(key) else None

    def summary(self, counters: Counters, *, searches: bool) -> dict[str, float]:
        """One metrics row: the mean of each metric (the sum of times, `*_seconds`, and of reanalyzed
        steps), the throughput (with `searches`, also searches_per_s: one search per env step) and the
        counters."""
        seconds = max(time.perf_counter() - self.start, 1e-9)
        out = {}
        for key in self.sums:
            if key.endswith("_seconds") or key == "reanalyzed_steps":
                out[key] = self.sums[key]
            else:
                out[key] = self.mean(key)
        out["env_steps_per_s"] = self.env_steps / seconds
        if searches:
            out["searches_per_s"] = self.env_steps / seconds
        out["updates_per_s"] = self.updates / seconds
        out["env_steps"] = float(counters.env_steps)
        out["episodes"] = float(counters.episodes)
        out["policy_version"] = float(counters.updates)
        return out


def clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def remaining_seconds(train, counters: Counters, elapsed: float) -> float | None:
    """The time left by the run's limits (--max-minutes, --max-env-steps) at this pace, or None without any."""
    fractions = []
    if train.max_minutes:
        fractions.append(elapsed / (60 * train.max_minutes))
    if train.max_env_steps:
        fractions.append(counters.env_steps / train.max_env_steps)
    if fractions and max(fractions) > 0:
        return elapsed * (1 - max(fractions)) / max(fractions)
    return None


_PROGRESS = (
    ("total_loss", "loss"),
    ("episode_return", "return"),
    ("test_return", "test"),
    ("test_win_rate", "win"),
    ("env_steps_per_s", "env/s"),
)


def print_progress(elapsed: float, counters: Counters, metrics: dict, remaining: float | None = None) -> None:
    """The progress line on stderr (redrawn in place on a terminal): time, ETA, counters, the last metrics."""
    eta = "" if remaining is None else f" ETA {clock(max(remaining, 0))}"
    parts = [f"{clock(elapsed)}{eta}", f"upd {counters.updates}", f"env {counters.env_steps}"]
    for key, label in _PROGRESS:
        value = metrics.get(key)
        if value is not None and math.isfinite(value):
            parts.append(f"{label} {value:.3g}")
    end = "\r" if sys.stderr.isatty() else "\n"
    print(" | ".join(parts).ljust(100), end=end, file=sys.stderr, flush=True)
