"""Board symmetries for data augmentation (AlphaGo Zero; the AlphaZero-for-Go design notes, docs/board_games.md).

A training target sampled from a square board game is as valid after any of
the 8 symmetries of the square (dihedral group D4) is applied to it, and a
Connect Four target after a left-right mirror. Augmenting each sampled target
with a random symmetry multiplies the data without playing more games. 2048's
board has the same 8 symmetries; its four moves are slides, which turn and
mirror with the board (a left slide, mirrored left-right, is a right slide).

A symmetry g is stored as a gather index over the flattened cells: the
transformed board is `board_flat[gather[g]]`, so cell q of the new board shows
the old cell gather[g][q] (that is g^-1(q)). Actions on cells move the other
way: the move at cell p becomes the move at g(p) = argsort(gather[g])[p].

The history input (moozi.core.history) holds L frames of C channels followed by L
one-hot action planes of A channels each; the frames are moved with the
cells, the action planes are permuted like actions. Policy targets p*[a] are
permuted like action planes: p'[g(a)] = p[a].
"""

from __future__ import annotations

import re
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from moozi.core.stochastic_loss import StochasticTrainingTarget
from moozi.core.types import TrainingTarget


class BoardSymmetry(NamedTuple):
    """How a game's board and actions transform.

    kind: "dihedral" (square boards; augmented action 1 + r*W + c is cell (r, c),
    higher actions such as Go's pass stay put), "mirror" (left-right only;
    augmented action 1 + c drops a piece in column c, as in Connect Four) or
    "slides" (square boards, all 8 symmetries; augmented actions 1..4 slide the
    tiles in the directions of `SLIDES`, as in 2048).
    """

    kind: str
    height: int
    width: int


# Game families (the name without library prefix, parameters or size suffix) with symmetries.
_FAMILIES = {"tic_tac_toe": "dihedral", "go": "dihedral", "connect_four": "mirror", "2048": "slides"}
# The directions (row step, column step) of the "slides" kind's actions 1..4: pgx's 2048 numbers its
# moves left, up, right, down.
SLIDES = ((0, -1), (-1, 0), (0, 1), (1, 0))


def game_family(canonical_name: str) -> str:
    """'openspiel:go(board_size=9,komi=7.5)' -> 'go'; 'pgx:go_9x9' -> 'go'; 'pgx:tic_tac_toe' -> 'tic_tac_toe'."""
    name = canonical_name.split(":", 1)[-1]
    name = name.split("(", 1)[0]
    return re.sub(r"_\d+x\d+$", "", name)


def board_symmetry(canonical_name: str, obs_shape: tuple[int, ...]) -> BoardSymmetry | None:
    """The symmetry of a game, or None for games without one (Atari, MinAtar, CartPole, ...)."""
    kind = _FAMILIES.get(game_family(canonical_name))
    if kind is None:
        return None
    height, width = int(obs_shape[0]), int(obs_shape[1])
    if kind in ("dihedral", "slides") and height != width:
        raise ValueError(f"{canonical_name}: dihedral symmetry needs a square board, got {height}x{width}")
    return BoardSymmetry(kind, height, width)


def cell_gathers(symmetry: BoardSymmetry) -> np.ndarray:
    """[G, H*W] gather indices, identity first (G = 8 for dihedral and slides, 2 for mirror)."""
    grid = np.arange(symmetry.height * symmetry.width).reshape(symmetry.height, symmetry.width)
    if symmetry.kind in ("dihedral", "slides"):
        boards = [np.rot90(grid, k) for k in range(4)] + [np.rot90(np.fliplr(grid), k) for k in range(4)]
    elif symmetry.kind == "mirror":
        boards = [grid, np.fliplr(grid)]
    else:
        raise ValueError(f"unknown symmetry kind {symmetry.kind!r} (allowed: dihedral, mirror, slides)")
    return np.stack([b.reshape(-1) for b in boards]).astype(np.int32)


def action_maps(symmetry: BoardSymmetry, num_actions: int) -> np.ndarray:
    """[G, A] maps of augmented actions: action a becomes maps[g, a]. The dummy 0 is fixed."""
    gathers = cell_gathers(symmetry)
    maps = np.tile(np.arange(num_actions, dtype=np.int32), (len(gathers), 1))
    if symmetry.kind == "dihedral":
        cells = symmetry.height * symmetry.width
        if num_actions < 1 + cells:
            raise ValueError(f"{num_actions} actions cannot cover a {symmetry.height}x{symmetry.width} board")
        forward = np.argsort(gathers, axis=1)  # g(p): where cell p goes
        maps[:, 1:1 + cells] = 1 + forward
    elif symmetry.kind == "slides":
        if num_actions < 1 + len(SLIDES):
            raise ValueError(f"{num_actions} actions cannot cover the {len(SLIDES)} slides")
        maps[:, 1:1 + len(SLIDES)] = 1 + _slide_maps(symmetry, gathers)
    else:  # mirror: one action per column
        width = symmetry.width
        if num_actions < 1 + width:
            raise ValueError(f"{num_actions} actions cannot cover {width} columns")
        maps[1, 1:1 + width] = 1 + (width - 1 - np.arange(width))
    return maps


def _slide_maps(symmetry: BoardSymmetry, gathers: np.ndarray) -> np.ndarray:
    """[G, 4]: the slide that slide i becomes under each symmetry. A symmetry is linear on the cells'
    coordinates, so a direction's image is where a cell's neighbour that way goes, seen from where the
    cell goes (any cell with that neighbour gives the same answer; the board is at least 2x2)."""
    width = symmetry.width
    forward = np.argsort(gathers, axis=1)  # [G, HW]: where cell p goes
    maps = np.zeros((len(gathers), len(SLIDES)), np.int32)
    for g, where in enumerate(forward):
        for i, (dr, dc) in enumerate(SLIDES):
            row, col = max(0, -dr), max(0, -dc)  # a cell whose neighbour (row + dr, col + dc) is on the board
            start, end = divmod(int(where[row * width + col]), width), divmod(int(where[(row + dr) * width + col + dc]), width)
            maps[g, i] = SLIDES.index((end[0] - start[0], end[1] - start[1]))
    return maps


def transform_board(planes, gather):
    """planes [..., H, W, C] under one symmetry's gather [H*W] (tests and single boards)."""
    *batch, height, width, channels = planes.shape
    flat = planes.reshape(*batch, height * width, channels)
    return flat[..., gather, :].reshape(*batch, height, width, channels)


def make_symmetry_transform(symmetry: BoardSymmetry, num_actions: int, frame_channels: int, history_length: int):
    """`transform(targets, g [B]) -> targets`: symmetry g[b] applied to batch element b (of a
    `StochasticTrainingTarget` too: its future history inputs move with the element's own)."""
    gathers = jnp.asarray(cell_gathers(symmetry))  # [G, HW]
    maps = action_maps(symmetry, num_actions)  # [G, A]
    inverse_maps = jnp.asarray(np.argsort(maps, axis=1).astype(np.int32))  # p'[a'] = p[inverse[a']]
    maps = jnp.asarray(maps)
    num_symmetries = gathers.shape[0]
    L, C, A = history_length, frame_channels, num_actions
    # Channel gather per symmetry for the history input: frames stay, each action block is permuted.
    channel_gathers = jnp.concatenate(
        [jnp.broadcast_to(jnp.arange(L * C), (num_symmetries, L * C))]
        + [L * C + block * A + inverse_maps for block in range(L)],
        axis=1,
    )

    def board(planes, g):
        # planes [H, W, Ch] of one element: cells by gathers[g], channels by channel_gathers[g].
        height, width, channels = planes.shape
        if channels != L * (C + A):
            raise ValueError(f"history input has {channels} channels, expected L*(C+A) = {L * (C + A)}")
        moved = planes.reshape(height * width, channels)[gathers[g]][:, channel_gathers[g]]
        return moved.reshape(height, width, channels)

    def one(target: TrainingTarget, g):
        replaced = dict(
            stacked_obs=board(target.stacked_obs, g),
            next_stacked_obs=board(target.next_stacked_obs, g),
            actions=maps[g][target.actions],
            action_probs=target.action_probs[..., inverse_maps[g]],
        )
        if target.ownership is not None:  # per point, moved with the cells
            height, width = target.ownership.shape
            replaced["ownership"] = target.ownership.reshape(height * width)[gathers[g]].reshape(height, width)
        if target.bootstrap_stacked_obs is not None:
            replaced["bootstrap_stacked_obs"] = jax.vmap(board, in_axes=(0, None))(target.bootstrap_stacked_obs, g)
        return target._replace(**replaced)

    def transform(targets: TrainingTarget | StochasticTrainingTarget, g):
        if isinstance(targets, StochasticTrainingTarget):  # the chance encoder's inputs move with the rest
            future = jax.vmap(jax.vmap(board, in_axes=(0, None)))(targets.future_stacked_obs, g)
            return targets._replace(target=jax.vmap(one)(targets.target, g), future_stacked_obs=future)
        return jax.vmap(one)(targets, g)

    transform.num_symmetries = num_symmetries
    return transform


def make_symmetry_augment(symmetry: BoardSymmetry, num_actions: int, frame_channels: int, history_length: int):
    """A jitted `augment(targets, key) -> targets` applying one uniformly drawn symmetry per element."""
    transform = make_symmetry_transform(symmetry, num_actions, frame_channels, history_length)

    @jax.jit
    def augment(targets: TrainingTarget | StochasticTrainingTarget, key):
        inner = targets.target if isinstance(targets, StochasticTrainingTarget) else targets
        g = jax.random.randint(key, (inner.actions.shape[0],), 0, transform.num_symmetries)
        return transform(targets, g)

    return augment
