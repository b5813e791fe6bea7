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


PROGRESS_WIDTH = 79
"""The progress line's most columns: it fits an 80-column terminal (where a longer line wraps and
the `\r` redraw then stacks lines instead of replacing one)."""


def _number(value: float) -> str:
    """A metric for the progress line: three significant digits, or a whole number with thousands
    separators from 1,000 up (1.23e+04 reads worse than 12,345)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def progress_line(elapsed: float, counters: Counters, metrics: dict, remaining: float | None = None) -> str:
    """The progress line: time and ETA, the counters (with thousands separators) and the last
    metrics, at most PROGRESS_WIDTH columns. "win vs random" is the in-training test's share of
    games won against the uniformly random player (two-player games). Where the parts do not fit,
    the least needed go first: the speed, the self-play return beside a test result, the updates."""
    eta = "" if remaining is None else f" ETA {clock(max(remaining, 0))}"
    tested = any(metrics.get(key) is not None and math.isfinite(metrics[key]) for key in ("test_return", "test_win_rate"))
    parts = [  # (text, rank): the lowest rank is dropped first; None: always kept
        (f"{clock(elapsed)}{eta}", None),
        (f"upd {counters.updates:,}", 3),
        (f"env {counters.env_steps:,}", 6),
    ]
    formats = (
        ("total_loss", lambda v: f"loss {_number(v)}", 4),
        ("episode_return", lambda v: f"return {_number(v)}", 2 if tested else 5),
        ("test_return", lambda v: f"test {_number(v)}", 5),
        ("test_win_rate", lambda v: f"win vs random {100 * v:.0f}%", 5),
        ("env_steps_per_s", lambda v: f"{_number(v)} env/s", 1),
    )
    for key, text, rank in formats:
        value = metrics.get(key)
        if value is not None and math.isfinite(value):
            parts.append((text(value), rank))
    ranks = sorted({rank for _, rank in parts if rank is not None})
    line = "  ".join(text for text, _ in parts)
    for dropped in ranks:
        if len(line) <= PROGRESS_WIDTH:
            break
        parts = [(text, rank) for text, rank in parts if rank != dropped]
        line = "  ".join(text for text, _ in parts)
    return line[:PROGRESS_WIDTH]


def print_progress(elapsed: float, counters: Counters, metrics: dict, remaining: float | None = None) -> None:
    """The progress line on stderr (`progress_line`), redrawn in place on a terminal (padded to
    PROGRESS_WIDTH to cover a longer line before it)."""
    line = progress_line(elapsed, counters, metrics, remaining)
    if sys.stderr.isatty():
        print(line.ljust(PROGRESS_WIDTH), end="\r", file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)
