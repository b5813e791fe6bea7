"""Bradley–Terry ratings on the Elo scale, fitted by maximum likelihood, with bootstrap intervals.

The model: player i scores against player j with probability
σ(θ_i − θ_j) = 1 / (1 + 10^(−(R_i − R_j)/400)), where R = 400·θ/ln 10 is the
Elo rating. A draw counts as half a win for each side. Ratings are only
defined up to a common shift, so one player (the anchor) is fixed at 0.

Games enter as a score matrix S [P, P]: S[i, j] = points i scored against j.
The log-likelihood Σ S[i, j]·log σ(θ_i − θ_j) is concave, and Newton's method
on it (the anchor's coordinate held at 0) converges in a handful of steps.

A player who won (or lost) every game has no finite maximum-likelihood rating.
`prior_draws` adds that many virtual draws to every pair that played, which
keeps every rating finite and pulls each pairwise gap towards 0 by about as
much as one real draw would; with `prior_draws=0` the fit is the exact MLE
and refuses data for which it does not exist.

Everything here is numpy on small matrices: a ladder has tens of players.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "ELO_PER_NAT",
    "bootstrap_elo",
    "fit_elo",
    "percentile_intervals",
    "score_matrix",
]

ELO_PER_NAT = 400.0 / math.log(10.0)  # Elo points per unit of θ
_MAX_NEWTON_STEPS = 200
_TOLERANCE = 1e-12  # in θ units: far below any rating difference worth printing


def score_matrix(num_players: int, first, second, score_first) -> np.ndarray:
    """S [P, P] with S[i, j] = points player i scored against player j.

    `first`, `second` [G]: the two players of each game (indices); `score_first`
    [G]: 1 for a win of `first`, 0.5 for a draw, 0 for a loss. Summing makes the
    result independent of the order in which games are listed.
    """
    first, second = np.asarray(first, np.int64), np.asarray(second, np.int64)
    score_first = np.asarray(score_first, np.float64)
    if not (first.shape == second.shape == score_first.shape) or first.ndim != 1:
        raise ValueError("first, second and score_first must be 1-D arrays of the same length")
    if first.size and (min(first.min(), second.min()) < 0 or max(first.max(), second.max()) >= num_players):
        raise ValueError(f"player indices must lie in 0..{num_players - 1}")
    if np.any(first == second):
        raise ValueError("a player cannot play itself")
    if np.any((score_first < 0) | (score_first > 1)):
        raise ValueError("scores must lie in [0, 1]")
    scores = np.zeros((num_players, num_players))
    np.add.at(scores, (first, second), score_first)
    np.add.at(scores, (second, first), 1.0 - score_first)
    return scores


def _reachable(adjacency: np.ndarray, start: int) -> np.ndarray:
    seen = np.zeros(len(adjacency), bool)
    seen[start] = True
    frontier = seen.copy()
    while frontier.any():
        frontier = adjacency[frontier].any(axis=0) & ~seen
        seen |= frontier
    return seen


def _check_identifiable(scores: np.ndarray, prior_draws: float) -> None:
    games = scores + scores.T
    if not _reachable(games > 0, 0).all():
        raise ValueError("some players are not linked to the others by any games: their relative ratings are undefined")
    if prior_draws == 0:
        # The MLE is finite iff every group of players scored at least once against the rest:
        # the "scored against" graph must be strongly connected (Hunter 2004, assumption 1).
        scored = scores > 0
        if not (_reachable(scored, 0).all() and _reachable(scored.T, 0).all()):
            raise ValueError(
                "no finite maximum-likelihood ratings: some players won or lost all their games; use prior_draws > 0"
            )


def _log_likelihood(theta: np.ndarray, scores: np.ndarray) -> float:
    gaps = theta[:, None] - theta[None, :]
    return float(np.sum(scores * -np.logaddexp(0.0, -gaps)))


def fit_elo(scores: np.ndarray, *, anchor: int = 0, prior_draws: float = 0.0) -> np.ndarray:
    """Maximum-likelihood (with `prior_draws`: maximum a posteriori) Elo ratings [P], anchor at 0.

    `scores` is `score_matrix(...)`. Raises ValueError when the ratings are not
    identifiable (disconnected players; a perfect record with `prior_draws=0`).
    """
    scores = np.array(scores, np.float64)
    num_players = scores.shape[0]
    if scores.shape != (num_players, num_players) or num_players < 2:
        raise ValueError("scores must be a square matrix over at least two players")
    if not 0 <= anchor < num_players:
        raise ValueError(f"anchor must be a player index in 0..{num_players - 1}")
    if prior_draws < 0:
        raise ValueError("prior_draws must be >= 0")
    np.fill_diagonal(scores, 0.0)
    played = (scores + scores.T) > 0
    scores = scores + 0.5 * prior_draws * played  # a virtual draw is half a point each way
    _check_identifiable(scores, prior_draws)

    games = scores + scores.T
    free = np.arange(num_players) != anchor
    theta = np.zeros(num_players)
    objective = _log_likelihood(theta, scores)
    for _ in range(_MAX_NEWTON_STEPS):
        win_prob = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        gradient = (scores - games * win_prob).sum(axis=1)
        weights = games * win_prob * win_prob.T  # [P, P], symmetric
        neg_hessian = np.diag(weights.sum(axis=1)) - weights  # a graph Laplacian: positive definite off the anchor
        step = np.zeros(num_players)
        step[free] = np.linalg.solve(neg_hessian[np.ix_(free, free)], gradient[free])
        # Damped: halve the step until the likelihood does not fall (far from the optimum a
        # full Newton step on the logistic can overshoot).
        scale = 1.0
        while True:
            candidate = theta + scale * step
            value = _log_likelihood(candidate, scores)
            if value >= objective - 1e-12 * abs(objective) or scale < 1e-8:
                break
            scale *= 0.5
        theta, objective = candidate, value
        if np.max(np.abs(scale * step)) < _TOLERANCE:
            break
    return theta * ELO_PER_NAT


def bootstrap_elo(
    num_players: int,
    first,
    second,
    score_first,
    *,
    samples: int,
    seed: int,
    anchor: int = 0,
    prior_draws: float = 0.0,
) -> np.ndarray:
    """Elo ratings [samples, P] refitted on games resampled with replacement.

    Resampling is within each pair of players: a pair that played n games gets
    n games drawn from its own, so every bootstrap sample keeps the schedule's
    design (who met whom, how often) and only the outcomes vary.
    """
    first, second = np.asarray(first, np.int64), np.asarray(second, np.int64)
    score_first = np.asarray(score_first, np.float64)
    if samples < 1:
        raise ValueError("samples must be a positive integer")
    rng = np.random.default_rng(seed)
    pair_keys = np.minimum(first, second) * num_players + np.maximum(first, second)
    groups = [np.flatnonzero(pair_keys == key) for key in np.unique(pair_keys)]
    ratings = np.empty((samples, num_players))
    for b in range(samples):
        chosen = np.concatenate([group[rng.integers(0, len(group), len(group))] for group in groups])
        scores = score_matrix(num_players, first[chosen], second[chosen], score_first[chosen])
        ratings[b] = fit_elo(scores, anchor=anchor, prior_draws=prior_draws)
    return ratings


def percentile_intervals(samples: np.ndarray, level: float = 0.95) -> np.ndarray:
    """[P, 2]: the central `level` percentile interval of each column of `samples` [B, P]."""
    tail = 100.0 * (1.0 - level) / 2.0
    return np.percentile(np.asarray(samples), [tail, 100.0 - tail], axis=0).T
