"""Confidence intervals for the rates moozi reports (win rates, solver-move shares)."""

from __future__ import annotations

import math

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
