"""2048's largest tile, read from pgx's one-hot board, and the shares `moozi eval` reports."""

from __future__ import annotations

import numpy as np

from moozi.evaluation.matches import ReturnResult, result_from_json
from moozi.evaluation.tiles import TILES, largest_tile, tile_shares


def _board(exponents: list[list[int]]) -> np.ndarray:
    board = np.zeros((4, 4, 31), np.float32)
    for r, row in enumerate(exponents):
        for c, k in enumerate(row):
            board[r, c, k] = 1.0
    return board


def test_the_largest_tile_is_two_to_the_highest_exponent_on_the_board():
    assert largest_tile(_board([[0] * 4] * 4)) == 0  # an empty board
    assert largest_tile(_board([[1, 0, 0, 0], [0, 2, 0, 0], [0, 0, 0, 0], [0, 0, 0, 11]])) == 2048
    assert largest_tile(_board([[3, 3, 1, 0], [0] * 4, [0] * 4, [0, 0, 0, 8]])) == 256


def test_tile_shares_count_games_that_reached_at_least_each_tile():
    assert TILES == (256, 512, 1024, 2048, 4096)
    assert tile_shares([128, 256, 512, 1024]) == {256: 0.75, 512: 0.5, 1024: 0.25, 2048: 0.0, 4096: 0.0}


def test_a_result_with_tiles_round_trips_and_prints_the_shares():
    result = ReturnResult.from_returns(game="pgx:2048", seed=0, returns=[1000.0, 3000.0],
                                       largest_tiles=[128, 256])
    text = result.to_json()
    assert '"tile_shares"' in text and '"256": 0.5' in text
    assert result_from_json(text) == result
    assert "largest tile reached: at least 256 50%, 512 0%, 1024 0%, 2048 0%, 4096 0% of the games (best 256)" \
        in result.format_table()
