"""Backgammon input features computed from pgx's board (`pgx:backgammon` with the bridge option
`backgammon_features`).

pgx's observation is the 28 signed checker counts (24 points, the two bars, the two trays) and the
playable dice. A count of 1 (a blot that can be hit), 2 (a made point) and 3 (a spare) mean
different things, and a small network trained for an hour learns those thresholds from a raw count
poorly. TD-Gammon's input (Tesauro, "Temporal Difference Learning and TD-Gammon", 1995) spells them
out per point and side as truncated unary units, and that encoding has stayed the base of neural
backgammon players since (GNU Backgammon's evaluator starts from it). Computed here from the
mover's view, as pgx's board is (positive counts the mover's, the mover's bar at 24 and tray at 26):

  per point (24) and side (mover first, then opponent), 4 units:
      n >= 1, n >= 2, n >= 3, (n - 3) / 2 where n > 3                      192
  each side's checkers on the bar / 2, then borne off / 15                  4
  each side's pip count / 167 (the opening position's)                     2

198 values, appended to pgx's own 34 (which keep the dice).
"""

from __future__ import annotations

import jax.numpy as jnp

NUM_FEATURES = 198
OPENING_PIP_COUNT = 167.0


def _unary(counts):
    """[24, 4] TD-Gammon's units for the checkers of one side on each point."""
    counts = counts.astype(jnp.float32)
    return jnp.stack([counts >= 1, counts >= 2, counts >= 3, jnp.maximum(counts - 3.0, 0.0) / 2.0],
                     axis=-1).astype(jnp.float32)


def backgammon_features(board):
    """[198] float32 features (module docstring) of pgx's `_board` [28], mover's view."""
    board = jnp.asarray(board, jnp.int32)
    points = board[:24]
    mover, opponent = jnp.maximum(points, 0), jnp.maximum(-points, 0)
    mover_bar, opponent_bar = board[24], -board[25]
    mover_off, opponent_off = board[26], -board[27]
    # The mover moves from point 0 towards 23 and bears off past 23; the opponent the other way.
    distance = jnp.arange(24)
    mover_pips = jnp.sum(mover * (24 - distance)) + 25 * mover_bar
    opponent_pips = jnp.sum(opponent * (distance + 1)) + 25 * opponent_bar
    counters = jnp.stack([mover_bar / 2.0, opponent_bar / 2.0, mover_off / 15.0, opponent_off / 15.0,
                          mover_pips / OPENING_PIP_COUNT, opponent_pips / OPENING_PIP_COUNT]).astype(jnp.float32)
    return jnp.concatenate([_unary(mover).reshape(-1), _unary(opponent).reshape(-1), counters])
