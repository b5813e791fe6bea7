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
