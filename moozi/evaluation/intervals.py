"""Confidence intervals for what moozi reports: win rates, solver-move shares, mean returns."""

from __future__ import annotations

import math

import numpy as np

Z_95 = 1.959963984540054  # the standard normal's 97.5% quantile: two-sided 95% intervals


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion.

    Unlike p ± z·sqrt(p(1-p)/n) it stays inside [0, 1] and is not empty at 0/n or
    n/n, which matters for the all-draw and never-lose results evaluation often gives.
    """
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half_width = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (max(0.0, centre - half_width), min(1.0, centre + half_width))


def bootstrap_mean_interval(values, resamples: int = 10_000, seed: int = 0) -> tuple[float, float] | None:
    """The 95% percentile-bootstrap interval of a mean (None with fewer than two values).

    Episode returns are often skewed (a few long MinAtar episodes score far
    above the rest), where the normal approximation's symmetric interval misleads.
    Seeded, so the same returns always give the same interval.
    """
    values = np.asarray(values, np.float64)
    if values.size < 2:
        return None
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, (resamples, values.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return (float(low), float(high))
