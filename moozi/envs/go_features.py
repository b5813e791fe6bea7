"""Go input features computed from pgx's board (`pgx:go_*` with the bridge option `go_features`).

pgx's observation is the stone history alone: 8 past boards of each colour and the colour to move.
Whether a group can be captured next move is then something the network must learn to count from
the stones, which a small network trained for an hour does poorly. KataGo measured such features
(liberties, atari, ko) as worth about 1.55x the self-play compute to reach the same strength
(Wu 2019, "Accelerating Self-Play Learning in Go", Table 2), and AlphaGo's network had them too.

Seven planes, from the view of the player to move (as pgx's own planes are):
  0-2  the mover's stones whose group has exactly 1, exactly 2, 3 or more liberties
  3-5  the opponent's stones, the same
  6    the ko point: the empty point the mover may not play this turn
A stone with one liberty is in atari. Liberties are counted exactly (distinct empty points next
to the group), not pgx's pseudo-liberties, which count an empty point once per adjacent stone.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

NUM_PLANES = 7


def _neighbours(size: int):
    """[N*N, 4] the on-board neighbours of every point, -1 off the board."""
    points = jnp.arange(size * size)
    rows, cols = points // size, points % size
    dr, dc = jnp.array([-1, 1, 0, 0]), jnp.array([0, 0, -1, 1])
    r, c = rows[:, None] + dr[None, :], cols[:, None] + dc[None, :]
    on_board = (r >= 0) & (r < size) & (c >= 0) & (c < size)
    return jnp.where(on_board, r * size + c, -1)


def liberties(board, size: int):
    """[N*N] int32: each stone's group's liberties (0 on empty points).

    `board` [N*N] is pgx's: 0 empty, otherwise +-(id + 1) where id is the point that names the
    stone's group (positive black, negative white)."""
    points = size * size
    chain = jnp.where(board != 0, jnp.abs(board) - 1, -1)  # [P]: group id of each stone
    adjacent = _neighbours(size)  # [P, 4]
    neighbour_chain = jnp.where(adjacent >= 0, chain[jnp.clip(adjacent, 0)], -1)  # [P, 4]
    # touches[e, g]: empty point e is next to a stone of group g; summed over e: g's liberties.
    touches = (neighbour_chain[:, :, None] == jnp.arange(points)[None, None, :]).any(axis=1)
    touches = touches & (board == 0)[:, None]
    per_group = touches.sum(axis=0)  # [P]
    return jnp.where(board != 0, per_group[jnp.clip(chain, 0)], 0).astype(jnp.int32)


def go_feature_planes(game_state, size: int):
    """[N, N, 7] float32 feature planes (module docstring) of a pgx go `GameState` (`state._x`)."""
    board = game_state.board[: size * size]
    libs = liberties(board, size)
    mover_sign = jnp.where(game_state.step_count % 2 == 0, 1, -1)  # black moves on even plies
    own = board * mover_sign > 0
    other = board * mover_sign < 0
    classes = [libs == 1, libs == 2, libs >= 3]
    planes = [own & c for c in classes] + [other & c for c in classes]
    ko = jnp.arange(size * size) == game_state.ko  # ko is -1 (no point) when there is none
    planes.append(ko)
    return jnp.stack(planes, axis=-1).reshape(size, size, NUM_PLANES).astype(jnp.float32)


def batched_go_feature_planes(game_states, size: int):
    """The planes for a batch of `GameState`s (tests, tools)."""
    return jax.vmap(lambda s: go_feature_planes(s, size))(game_states)
