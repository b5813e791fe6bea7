"""Where a board game's actions land on its board, as planes the dynamics function can see.

The thesis encodes an action for the dynamics function as a one-hot vector
divided by A and tiled over the whole board (the Atari encoding). For a board
game that hides where the move was made: a convolution has to learn, from a
constant input, which column of Connect Four just got a piece. MuZero itself
encodes board-game actions spatially (Go: a plane marking the stone's point),
so for games whose actions are cells or columns of the observed board we add
one plane per action: 1 where the action acts, 0 elsewhere. The dummy action's
plane is all zeros.

`action_planes(spec)` is [A, H, W] float32 for the games below, None for others.
Each map is checked against the bridge's own observation in tests (the piece a
move adds appears inside its plane).

Games observed as a vector have no cells to mark. Where such a game's action
is a move from one place to another, `action_features(spec)` [A, F] describes
each action by its parts, which an MLP's dynamics function sees beside the
action's one-hot: pgx's backgammon numbers 156 checker moves (6 · source +
die), and a one-hot of 156 leaves the dynamics to learn each move's effect on
the board separately, while (source, die, target) one-hots share what moving a
checker off a point, or onto one, does across every move that does it.
"""

from __future__ import annotations

import numpy as np

from moozi.envs.base import EnvSpec


def _columns(height: int, width: int) -> np.ndarray:
    planes = np.zeros((width + 1, height, width), np.float32)
    for column in range(width):
        planes[column + 1, :, column] = 1.0
    return planes


def _cells(height: int, width: int) -> np.ndarray:
    planes = np.zeros((height * width + 1, height, width), np.float32)
    for cell in range(height * width):
        planes[cell + 1, cell // width, cell % width] = 1.0
    return planes


_MAPS = {
    "openspiel:connect_four": lambda: _columns(6, 7),
    "pgx:connect_four": lambda: _columns(6, 7),
    "openspiel:tic_tac_toe": lambda: _cells(3, 3),
    "pgx:tic_tac_toe": lambda: _cells(3, 3),
}


def _backgammon_moves() -> np.ndarray:
    # pgx: library action = 6 * source + (die - 1), source 0 = no move, 1 = the bar, 2 + p = point p
    # (0..23, from the mover's side; the mover runs from 0 to 23 and bears off past 23). A checker
    # from the bar enters on point die - 1. Features: source (26), die (6), target (point 0..23 or
    # off: 25); the dummy action (row 0) and the no-move actions have no target.
    features = np.zeros((1 + 26 * 6, 26 + 6 + 25), np.float32)
    for library_action in range(26 * 6):
        row = features[library_action + 1]
        source, die = divmod(library_action, 6)
        die += 1
        row[source] = 1.0
        row[26 + die - 1] = 1.0
        if source == 0:
            continue
        target = die - 1 if source == 1 else min(source - 2 + die, 24)
        row[32 + target] = 1.0
    return features


_FEATURES = {"pgx:backgammon": _backgammon_moves}


def action_features(spec: EnvSpec) -> np.ndarray | None:
    """[A, F]: each action of a vector-observed game described by its parts, or None where the game has none."""
    make = _FEATURES.get(spec.name)
    if make is None:
        return None
    features = make()
    if features.shape[0] != spec.num_actions:
        raise ValueError(f"the action features of {spec.name} have {features.shape[0]} rows, the spec has "
                         f"{spec.num_actions} actions")
    return features


def _go_size(name: str) -> int | None:
    """9 for 'pgx:go_9x9' and 'openspiel:go(board_size=9,...)'; None for any other game."""
    if name.startswith("pgx:go_"):
        return int(name.rsplit("x", 1)[-1])
    if name.startswith("openspiel:go(") or name == "openspiel:go":
        for part in name[len("openspiel:go("):-1].split(","):
            key, _, value = part.partition("=")
            if key.strip() == "board_size":
                return int(value)
        return 19  # OpenSpiel's default
    return None


def point_actions(spec: EnvSpec) -> np.ndarray | None:
    """[A, H, W]: for games whose moves place a stone on one cell (Go, tic-tac-toe), the cell of each
    action; rows of actions that place nothing (the dummy, Go's pass) are zero. None for other games.
    A convolutional policy head (moozi/core/network.py) reads one logit per cell through it.

    Kept apart from `action_planes` (the dynamics function's input), so that adding a game here leaves
    the parameters of networks saved before unchanged."""
    size = _go_size(spec.name)
    if size is not None:
        cells = _cells(size, size)
    elif spec.name in ("openspiel:tic_tac_toe", "pgx:tic_tac_toe"):
        cells = _cells(3, 3)
    else:
        return None
    planes = np.zeros((spec.num_actions, *spec.obs_shape[:2]), np.float32)
    planes[: cells.shape[0]] = cells
    return planes


def action_planes(spec: EnvSpec) -> np.ndarray | None:
    """[A, H, W]: the board cells each action acts on, or None where the game has no known map."""
    make = _MAPS.get(spec.name)
    if make is None:
        return None
    planes = make()
    if planes.shape != (spec.num_actions, *spec.obs_shape[:2]):
        raise ValueError(f"the action map of {spec.name} has shape {planes.shape}, the spec needs "
                         f"{(spec.num_actions, *spec.obs_shape[:2])}")
    return planes
