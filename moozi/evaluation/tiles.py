"""2048's largest tile: what a game of 2048 reached, read from its last observation.

pgx's `2048` shows the board as 4 x 4 cells one-hot over 31 exponents (plane 0: an empty cell, plane k:
the tile 2^k). The score alone hides how far a game got; the tile it reached is how 2048 results are
compared (the share of games that reach 256, 512, 1024, 2048)."""

from __future__ import annotations

import numpy as np

GAMES_WITH_TILES = ("pgx:2048",)
TILES = (256, 512, 1024, 2048, 4096)  # the shares `moozi eval` reports


def largest_tile(obs) -> int:
    """The largest tile on a 2048 board [4, 4, 31] (0 on an empty board)."""
    planes = np.flatnonzero(np.asarray(obs).reshape(-1, np.shape(obs)[-1]).max(axis=0) > 0)
    exponent = int(planes.max()) if planes.size else 0
    return 0 if exponent == 0 else 2 ** exponent


def tile_shares(tiles: list[int]) -> dict[int, float]:
    """For each of TILES, the share of games whose largest tile is at least that tile."""
    values = np.asarray(tiles)
    return {tile: float(np.mean(values >= tile)) for tile in TILES}
